package seam

import (
	"fmt"

	"connectrpc.com/connect"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
)

// Invalid turns a validation failure into the API error: InvalidArgument
// (HTTP 400) with reason, the field-named message and the field in the
// ErrorInfo; nil when err is nil, so that a validator's result can be
// passed as it is.
func Invalid(reason apierr.Reason, err error, meta ...apierr.Meta) error {
	if err == nil {
		return nil
	}
	return apierr.New(connect.CodeInvalidArgument, reason, err, meta...)
}

// TooMany is the refusal of a list over its limit: InvalidArgument,
// BATCH_TOO_LARGE with the limit.
func TooMany(field, has string, limit int) error {
	return Invalid(apierr.BatchTooLarge, &receipt.FieldError{Field: field, Reason: fmt.Sprintf("%s; the limit is %d", has, limit)}, apierr.Limit(int64(limit)))
}
