package seam

import (
	"cmp"
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/event"
)

// UserWrite is one call's change of one of a user's registers (settings,
// a notification level, a membership, a marked-unread read), as the write
// step runs it (WriteUser): admit the record before Redis is touched →
// change Redis → on a Redis failure, the degraded value or a refusal →
// encode → stamp the erasure generation the change read → produce →
// answer.
type UserWrite[V any] struct {
	// User is whose state changes: the erasure generation stamped on the
	// record is the one Change read for this user.
	User string
	// Op labels a Redis failure (redis_degraded_total); RedisOpMerge when
	// empty.
	Op string
	// Encode is the record of a value (stamped later).
	Encode func(V) (*kgo.Record, error)
	// Largest is the value at its longest (versions at their maximum):
	// its record, stamped with the longest generation, is what a full
	// spool is asked to take before Redis is touched.
	Largest V
	// Change applies the write to Redis and returns the value to make
	// durable and the erasure generation the write read (event.Unstamped
	// when it read none: GenerationOf). redisErr is a Redis failure (the
	// answer degrades, or Degraded refuses); err refuses the call as it is
	// (nothing produced).
	Change func(ctx context.Context) (v V, gen int64, redisErr, err error)
	// Degraded, when Change's Redis write failed, returns the value to
	// make durable without Redis, or the error to answer instead (nothing
	// produced). Nil refuses with Unavailable and Retry-After: a change
	// the real-time view must show before the call may succeed.
	Degraded func(v V, redisErr error) (V, error)
	// Cursors says the change is of the user's cursors (a mark-unread):
	// the answer waits for Redis' replicas to take it (Replicated), and
	// one they did not take is answered as a degraded write of the user.
	Cursors bool
}

// Written is what the write step made durable, and where.
type Written[V any] struct {
	Value      V
	Durability receiptsv1.Durability
	// Degraded: Redis failed; the value came from UserWrite.Degraded and
	// the answer says realtime_degraded.
	Degraded bool
}

// WriteUser runs w, the one write step of a user's register: success
// means the record is durable (Kafka, or the spool), stamped so that an
// erasure drops it only if it came first.
func WriteUser[V any](ctx context.Context, g *Core, w UserWrite[V]) (Written[V], error) {
	largest, err := w.Encode(w.Largest)
	if err == nil {
		event.StampGeneration(largest, math.MaxInt64)
	}
	if _, err := g.Admit(ctx, largest, err); err != nil {
		return Written[V]{}, err
	}
	degraded := false // the user's write was left degraded (for confirmed)
	if w.Cursors {
		// Reads and later writes of the user wait for the replicas until
		// this write's wait is over (unconfirmed.go).
		var confirmed func([]string)
		ctx, confirmed = g.Unconfirmed(ctx, []string{w.User})
		defer func() {
			if degraded {
				confirmed([]string{w.User})
			}
			confirmed(nil)
		}()
	}
	v, gen, redisErr, err := w.Change(ctx)
	if err != nil {
		return Written[V]{}, err
	}
	var out Written[V]
	if redisErr != nil {
		g.RedisDegradedOn(ctx, cmp.Or(w.Op, RedisOpMerge), 1, redisErr)
		if w.Degraded == nil {
			return Written[V]{}, UnavailableError(fmt.Errorf("applying the change to the real-time view: %w; retry", redisErr), apierr.RetryAfter(g.Cfg.RetryAfter))
		}
		if v, err = w.Degraded(v, redisErr); err != nil {
			return Written[V]{}, err
		}
		out.Degraded, degraded = true, true
	}
	rec, err := w.Encode(v)
	if err != nil {
		return Written[V]{}, Internal(err)
	}
	var lagging chan []bool
	if w.Cursors && !out.Degraded && g.Cfg.ReplicaAcks > 0 {
		lagging = make(chan []bool, 1)
		go func() { lagging <- g.Replicated(ctx, []string{w.User}) }()
	}
	if out.Durability, err = g.ProduceUserRecord(ctx, rec, w.User, gen); err != nil {
		return Written[V]{}, err
	}
	if lagging != nil {
		if l := <-lagging; len(l) == 1 && l[0] {
			out.Degraded = true
			g.Restore.NoteDegraded([]string{w.User})
			degraded = true
		}
	}
	out.Value = v
	return out, nil
}
