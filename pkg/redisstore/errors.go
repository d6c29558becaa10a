package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/errclass"
)

// Classify is the one place where Redis errors are sorted, by go-redis's
// own error types and the server's error prefixes: Unavailable when the
// server is unreachable, timed out, loading, busy with a script, failing
// over, read-only, out of memory or clients, or moving slots (trying later
// can succeed); Canceled for our own caller's cancellation; Permanent for
// an error the server answers about the command itself (a script error, a
// wrong type, credentials), which repeating cannot fix. redis.Nil (no
// value) is not an error. Either way the gateway keeps a mark durable and
// reports the real-time view as degraded; the class tells what is worth
// retrying and what an operator must see.
func Classify(err error) errclass.Class {
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		return errclass.None
	case errors.Is(err, context.Canceled):
		return errclass.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return errclass.Unavailable
	}
	if _, ok := errors.AsType[redis.Error](err); !ok {
		// No answer from the server: a dial, read or write failure.
		return errclass.Unavailable
	}
	if redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) || redis.IsMaxClientsError(err) ||
		redis.IsOOMError(err) || redis.IsNoReplicasError(err) ||
		redis.HasErrorPrefix(err, "BUSY") || redis.HasErrorPrefix(err, "NOSCRIPT") {
		return errclass.Unavailable
	}
	if _, moved := redis.IsMovedError(err); moved {
		return errclass.Unavailable
	}
	if _, ask := redis.IsAskError(err); ask {
		return errclass.Unavailable
	}
	return errclass.Permanent
}
