package kafkaconf

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/errclass"
)

// Classify is the one place where Kafka errors are sorted:
//   - Unavailable when trying again later can succeed: the broker is down,
//     slow or electing a leader, kgo gave up on a record's delivery or
//     buffer, or our own deadline ran out;
//   - Rejected when the broker refuses this record for good (too large,
//     invalid);
//   - Permanent when it refuses us for good (authorization, SASL,
//     an unsupported request);
//   - Canceled when the client is closed or the caller gave up.
//
// An error that is none of these is a connection or protocol failure,
// which kgo's own IsRetryableBrokerErr and an unknown failure both treat as
// transient: at worst a record is retried until an operator looks, never
// dropped.
func Classify(err error) errclass.Class {
	switch {
	case err == nil:
		return errclass.None
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled):
		return errclass.Canceled
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, kgo.ErrMaxBuffered), errors.Is(err, context.DeadlineExceeded):
		return errclass.Unavailable
	}
	ke, ok := errors.AsType[*kerr.Error](err)
	switch {
	case !ok, ke.Retriable:
		return errclass.Unavailable
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.InvalidRecord),
		errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRequiredAcks):
		return errclass.Rejected
	}
	return errclass.Permanent
}
