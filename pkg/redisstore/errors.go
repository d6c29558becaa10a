package redisstore

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// IsRetryable is the one place where Redis errors are sorted: true when the
// server is unreachable, loading, busy, failing over or timed out (trying
// later can succeed), false for a cancelled caller and for errors the server
// answers about the command itself (a script error, a wrong type), which
// repeating cannot fix. Either way the gateway keeps the mark durable and
// reports the real-time view as degraded; the difference is what is worth
// retrying and what an operator must see.
func IsRetryable(err error) bool {
	switch {
	case err == nil, errors.Is(err, redis.Nil), errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, transient := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "MOVED", "ASK", "NOSCRIPT"} {
			if strings.HasPrefix(msg, transient) {
				return true
			}
		}
		return false
	}
	return true
}
