package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readstate/receipts/pkg/errclass"
)

// Every error the store returns wraps one of these, chosen by Classify.
var (
	// ErrRejected means Postgres refused the data itself (SQLSTATE class 22
	// "data exception" or 23 "integrity constraint violation"): retrying the
	// same rows cannot succeed, so they belong on the dead-letter topic.
	ErrRejected = errors.New("rejected by postgres")
	// ErrUnavailable means Postgres could not be used now: no answer or a
	// lost connection (class 08, network errors, timeouts, a closed pool),
	// shutting down or crashed (57), out of resources (53, 58), a
	// serialization failure or deadlock (40), a lock not available (55).
	ErrUnavailable = errors.New("postgres unavailable")
	// ErrPermanent means Postgres answered with an error that repeating
	// will not fix and that is not the data's fault: a missing database or
	// table, bad credentials, a broken migration (classes 28, 3D, 42, XX,
	// and every other answered SQLSTATE).
	ErrPermanent = errors.New("postgres refuses the operation")
)

// Classify is the one place where Postgres errors are sorted. It reads the
// class a store error was wrapped with, or sorts a raw pgx error by its
// SQLSTATE. An error without a SQLSTATE is Unavailable: an unknown failure
// must never send good rows to the dead-letter topic; at worst it is
// retried until an operator looks.
func Classify(err error) errclass.Class {
	switch {
	case err == nil:
		return errclass.None
	case errors.Is(err, context.Canceled):
		return errclass.Canceled
	case errors.Is(err, ErrRejected):
		return errclass.Rejected
	case errors.Is(err, ErrPermanent):
		return errclass.Permanent
	case errors.Is(err, ErrUnavailable):
		return errclass.Unavailable
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return errclass.Unavailable
	}
	switch pgErr.Code[:2] {
	case "22", "23":
		return errclass.Rejected
	case "08", "40", "53", "55", "57", "58":
		return errclass.Unavailable
	}
	return errclass.Permanent
}

// Classified wraps err with the sentinel of its class (Classify), so
// callers can also match it with errors.Is: what a kind's statements
// return, as the store's do.
func Classified(err error) error { return classify(err) }

// classify wraps err with the sentinel of its class, so callers can also
// match it with errors.Is.
func classify(err error) error {
	var sentinel error
	switch Classify(err) {
	case errclass.Rejected:
		sentinel = ErrRejected
	case errclass.Unavailable:
		sentinel = ErrUnavailable
	case errclass.Permanent:
		sentinel = ErrPermanent
	default:
		return err
	}
	if errors.Is(err, sentinel) {
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}
