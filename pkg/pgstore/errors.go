package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrRejected means Postgres refused the data itself (SQLSTATE class 22
	// "data exception" or 23 "integrity constraint violation"): retrying the
	// same rows cannot succeed, so they belong on the dead-letter topic.
	ErrRejected = errors.New("rejected by postgres")
	// ErrUnavailable means Postgres could not be used: connection failures
	// (class 08), shutdown (57P01..57P03), serialization failure or deadlock
	// (class 40), resources (class 53), a closed pool, a timeout. Retrying
	// later can succeed.
	ErrUnavailable = errors.New("postgres unavailable")
)

// classify wraps err with ErrRejected or ErrUnavailable. It is the one place
// where Postgres errors are sorted. Anything that is not a data error counts
// as unavailable: an unknown failure must never send good rows to the
// dead-letter topic; at worst it is retried until an operator looks.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrRejected) || errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "22", "23":
			return fmt.Errorf("%w: %w", ErrRejected, err)
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// IsRejected reports whether err means the data was refused.
func IsRejected(err error) bool { return errors.Is(err, ErrRejected) }

// IsRetryable reports whether retrying later can help: everything but
// rejected data and a cancelled context.
func IsRetryable(err error) bool {
	return err != nil && !errors.Is(err, ErrRejected) && !errors.Is(err, context.Canceled)
}

// IsUnreachable reports whether an operation failed because Postgres could
// not run it at all (no answer, connection lost, shutting down, out of
// resources, serialization or deadlock), as opposed to Postgres answering
// with an error that trying again would only repeat (a missing database,
// bad credentials, a broken migration).
func IsUnreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	switch pgErr.Code[:2] {
	case "08", "53", "57", "40":
		return true
	}
	return false
}
