package kafkaconf

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// IsRetryable is the one place where Kafka errors are sorted: true when
// trying again later can succeed (the broker is down, slow, electing a
// leader, or our own deadline ran out), false when it cannot (the client is
// closed, the caller gave up, or the broker refuses the record or our
// credentials for good). Callers spool or retry the first kind and surface
// the second.
func IsRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, kgo.ErrMaxBuffered), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	// Anything else is a connection or protocol failure, which kgo's own
	// IsRetryableBrokerErr and an unknown failure both treat as transient:
	// at worst a record is retried until an operator looks, never dropped.
	return true
}
