package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// bounded records the clients Bound has hooked, so a client shared by
// several stores (a restarted gateway on the same client, in tests) is
// hooked once.
var bounded sync.Map // redis.UniversalClient → time.Duration

// Bound makes every command and pipeline rdb runs wait at most d for
// Redis, each round trip under a deadline of its own (the caller's, when
// earlier): one bound for every call of a service on its client, so that
// a hung Redis degrades an answer instead of holding it (the client
// honours the deadline on the socket: ClientConfig). A client is bounded
// once; the first d stays. A bounded client is not for blocking reads (a
// watch hub's XREAD): those read on a client of their own.
func Bound(rdb redis.UniversalClient, d time.Duration) {
	if d <= 0 {
		return
	}
	if _, loaded := bounded.LoadOrStore(rdb, d); loaded {
		return
	}
	rdb.AddHook(boundHook{d: d})
}

// boundHook is Bound's hook.
type boundHook struct{ d time.Duration }

func (h boundHook) DialHook(next redis.DialHook) redis.DialHook {
	return next // a dial runs under the command that needs it
}

func (h boundHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		ctx, cancel := context.WithTimeout(ctx, h.d)
		defer cancel()
		return next(ctx, cmd)
	}
}

func (h boundHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		ctx, cancel := context.WithTimeout(ctx, h.d)
		defer cancel()
		return next(ctx, cmds)
	}
}
