package gate

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// write runs the write path for validated marks: the checks against the
// channels (seq within the head, membership), Redis merge (epochs
// resolved, stale marks refused), then the durable write of every mark
// not refused, then one result per mark.
func (g *Gate) write(ctx context.Context, marks []mark) ([]*receiptsv1.ReceiptResult, error) {
	if err := g.checkMarks(ctx, marks); err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	states := make([]receipt.State, len(marks))
	recs := make([]*kgo.Record, len(marks))
	for i, m := range marks {
		states[i] = m.state(now)
		rec, err := event.Encode(states[i])
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		rec.Topic = g.durable.Topic()
		recs[i] = rec
	}

	// A call bound for a full spool is refused before Redis sees it (the
	// records' sizes do not change when their epochs are resolved).
	if err := g.durable.Refuse(recs); err != nil {
		return nil, g.unavailable(len(recs), err)
	}

	merged := g.mergeRedis(ctx, states)
	resolved, err := g.resolveEpochs(ctx, states, merged)
	if err != nil {
		return nil, err
	}

	// Every mark is produced, including those Redis found to be no-ops:
	// Redis may hold a value whose own produce failed (the caller got
	// Unavailable and is retrying now), and only this produce makes it
	// durable. A stale mark (an older epoch) changes nothing anywhere.
	recs = recs[:0]
	for i := range marks {
		if merged[i].Err == nil && merged[i].Stale {
			continue
		}
		rec, err := event.Encode(resolved[i])
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		// The generation read in the merge's script: consumers drop the
		// event only if the user was erased after it (tombstone.Drops).
		event.StampGeneration(rec, merged[i].Generation)
		rec.Topic = g.durable.Topic()
		recs = append(recs, rec)
	}
	durability, err := g.produce(ctx, recs)
	if err != nil {
		return nil, err
	}

	results := make([]*receiptsv1.ReceiptResult, len(marks))
	for i := range marks {
		res := &receiptsv1.ReceiptResult{Durability: durability}
		switch {
		case merged[i].Err != nil:
			// The merged state is unknown; advanced stays false.
			res.RealtimeDegraded = true
		case merged[i].Stale:
			res.State = event.StateToProto(merged[i].State)
			res.Durability = receiptsv1.Durability_DURABILITY_UNSPECIFIED
		default:
			res.State = event.StateToProto(merged[i].State)
			res.Advanced = merged[i].Advanced
		}
		results[i] = res
	}
	return results, nil
}

// produce makes records durable and answers where; no records is a
// no-op (DURABILITY_UNSPECIFIED).
func (g *Gate) produce(ctx context.Context, recs []*kgo.Record) (receiptsv1.Durability, error) {
	if len(recs) == 0 {
		return receiptsv1.Durability_DURABILITY_UNSPECIFIED, nil
	}
	start := time.Now()
	dur, err := g.durable.Write(ctx, recs)
	g.m.produce.Observe(time.Since(start).Seconds())
	if err != nil {
		if cerr := contextError(ctx, err); cerr != nil {
			g.m.events.WithLabelValues(outcomeUnavailable).Add(float64(len(recs)))
			return 0, cerr
		}
		return 0, g.unavailable(len(recs), err)
	}
	outcome, durability := outcomeKafka, receiptsv1.Durability_KAFKA
	if dur == producer.Spooled {
		outcome, durability = outcomeSpooled, receiptsv1.Durability_SPOOLED
	}
	g.m.events.WithLabelValues(outcome).Add(float64(len(recs)))
	return durability, nil
}

// unavailable is the answer when a call's marks could not be made durable:
// Unavailable (HTTP 503) with a Retry-After hint, which connect sends as a
// header (trailer for gRPC) and vanguard as a REST header. Nothing was
// acknowledged; Redis may already hold the marks (the write path merges it
// first), which is harmless: the caller retries, and if it does not, the
// drift sweep makes Postgres agree with Redis.
func (g *Gate) unavailable(n int, err error) error {
	g.m.events.WithLabelValues(outcomeUnavailable).Add(float64(n))
	if everySecond(&g.lastDurableWarn) {
		g.log.Warn("making marks durable; answering unavailable", zap.Int("num_records", n), zap.String("topic", g.durable.Topic()), zap.Error(err))
	}
	cerr := connect.NewError(connect.CodeUnavailable,
		fmt.Errorf("making %d marks durable: %w; nothing was acknowledged, retry", n, err))
	cerr.Meta().Set("Retry-After", g.retryAfter)
	return cerr
}

// mergeRedis merges the marks in one pipeline under RedisTimeout
// (redisstore.MergeMarks: epochs resolved, stale marks refused). It always
// returns one result per state; failures are per result.
func (g *Gate) mergeRedis(ctx context.Context, states []receipt.State) []redisstore.MergeResult {
	rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	defer cancel()
	merged, err := g.redis.MergeMarks(rctx, states)
	if len(merged) != len(states) {
		// Merge gave up before running the pipeline (e.g. reloading scripts).
		if err == nil {
			err = redisstore.ErrUnavailable
		}
		merged = make([]redisstore.MergeResult, len(states))
		for i := range merged {
			merged[i].Err = err
		}
	}
	failed := 0
	for i := range merged {
		if merged[i].Err != nil {
			failed++
			if err == nil {
				err = merged[i].Err
			}
		}
	}
	if failed > 0 {
		g.m.redisDegraded.WithLabelValues(redisOpMerge).Add(float64(failed))
		g.warnRedis(redisOpMerge, err)
	}
	return merged
}
