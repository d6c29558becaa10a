package seam

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
)

// errBeyondHead is the reason of a mark past the channel's known head.
const errBeyondHead = "seq beyond channel head"

// HeadBehindRetryAfter is the Retry-After of a mark beyond the known
// head (HEAD_BEHIND). The message's notice travels the upstream's other
// pipeline and is usually in within milliseconds: one second is the
// shortest delay the header can say, and a client that retries sooner
// only costs a Redis read.
const HeadBehindRetryAfter = time.Second

// HeadBehind is the answer to a mark beyond the head the service knows:
// the notice of its message has not arrived yet, so it is a race the
// caller wins by retrying (Aborted, HTTP 409, with Retry-After), not a
// bad request.
func HeadBehind(field string, seq, head int64) error {
	return apierr.New(connect.CodeAborted, apierr.HeadBehind,
		&receipt.FieldError{Field: field, Reason: fmt.Sprintf("%s (seq %d, head %d); the message's notice has not arrived yet, retry", errBeyondHead, seq, head)},
		apierr.Head(head), apierr.RetryAfter(HeadBehindRetryAfter))
}

// BeyondHead is the refusal of a join point beyond the channel's head:
// InvalidArgument, SEQ_BEYOND_HEAD.
func BeyondHead(field string, seq, head int64) error {
	return Invalid(apierr.SeqBeyondHead, &receipt.FieldError{Field: field, Reason: fmt.Sprintf("%s (seq %d, head %d)", errBeyondHead, seq, head)}, apierr.Head(head))
}

func NotMember(prefix string, k receipt.Key) error {
	return apierr.New(connect.CodePermissionDenied, apierr.NotAMember,
		fmt.Errorf("%suser_id: %q is not a member of channel %q", prefix, k.User, k.Channel), apierr.Field(prefix+"user_id"))
}

// Charge spends n more events of the calling client's rate limit
// (apiauth.Charge) for the work a call causes beyond what the transport
// charged; a refusal is ResourceExhausted with Retry-After
// (apiauth.RateLimited).
func Charge(ctx context.Context, n int) error {
	if err := apiauth.Charge(ctx, n); err != nil {
		return apiauth.RateLimited(err)
	}
	return nil
}
