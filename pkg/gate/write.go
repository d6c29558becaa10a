package gate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/sethvargo/go-retry"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// durableWriter makes a call's records durable, all or nothing from the
// caller's view, and says where. kafkaWriter answers KAFKA or fails;
// spoolWriter (with a SpoolDir) wraps it and answers SPOOLED when Kafka
// fails or is slow.
type durableWriter interface {
	Write(ctx context.Context, recs []*kgo.Record) (receiptsv1.Durability, error)
}

// kafkaWriter produces records with acks=all and waits for every ack.
type kafkaWriter struct {
	cl      *kgo.Client
	timeout time.Duration
}

// retryBackoff spaces re-produces of failed records within one call.
const retryBackoff = 50 * time.Millisecond

// Write produces all records first and then waits for all acks together,
// so a batch costs one round of broker requests, not one per record.
// Records that fail with a retryable error (kafkaconf.IsRetryable) are
// produced again until the timeout: kgo fails every
// record buffered behind one that failed in the same partition (to keep
// ordering gapless), so right after an outage a fresh record can fail for
// an older one's sake, and a second try succeeds. At the timeout the call
// gives up; records then still in flight may land later, which is harmless
// (consumers max-merge), but the call is not acknowledged.
func (w *kafkaWriter) Write(ctx context.Context, recs []*kgo.Record) (receiptsv1.Durability, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	pending := recs
	attempts := 0
	var last error // go-retry reports only ctx.Err() when the deadline ends it
	err := retry.Do(ctx, retry.NewConstant(retryBackoff), func(ctx context.Context) error {
		attempts++
		failed, err := w.produce(ctx, pending)
		if err == nil {
			return nil
		}
		pending, last = failed, err
		if !kafkaconf.IsRetryable(err) {
			return err
		}
		return retry.RetryableError(err)
	})
	if err != nil {
		if last != nil {
			err = last
		}
		return receiptsv1.Durability_DURABILITY_UNSPECIFIED,
			fmt.Errorf("producing %d records (attempt %d, %d not acked): %w", len(recs), attempts, len(pending), err)
	}
	return receiptsv1.Durability_KAFKA, nil
}

// produce sends one round and returns the records not acked (copies, ready
// to be produced again) with the first error, or nil when all were acked.
func (w *kafkaWriter) produce(ctx context.Context, recs []*kgo.Record) ([]*kgo.Record, error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []*kgo.Record
		first  error
	)
	wg.Add(len(recs))
	for _, r := range recs {
		// kgo writes partition, offset and producer fields into a record:
		// each round sends fresh copies.
		rec := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
		// The promise runs even when Produce gives up on ctx, so wg always
		// completes; kgo bounds it with RecordDeliveryTimeout.
		w.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = append(failed, r)
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return recs, fmt.Errorf("waiting for acks: %w", ctx.Err())
	}
	return failed, first
}

// write runs the write path for validated marks: Redis max-merge, then the
// durable write, then one result per mark.
func (g *Gate) write(ctx context.Context, marks []mark) ([]*receiptsv1.ReceiptResult, error) {
	now := time.Now().UnixMilli()
	states := make([]receipt.State, len(marks))
	recs := make([]*kgo.Record, len(marks))
	for i, m := range marks {
		states[i] = m.state(now)
		rec, err := event.Encode(states[i])
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		rec.Topic = g.cfg.Topic
		recs[i] = rec
	}

	// A call bound for a full spool is refused before Redis sees it.
	if g.spooler != nil {
		if err := g.spooler.refuse(recs); err != nil {
			return nil, g.unavailable(len(recs), err)
		}
	}

	merged := g.mergeRedis(ctx, states)

	// Every mark is produced, including those Redis found to be no-ops:
	// Redis may hold a value whose own produce failed (the caller got
	// Unavailable and is retrying now), and only this produce makes it
	// durable.
	start := time.Now()
	dur, err := g.durable.Write(ctx, recs)
	g.m.produce.Observe(time.Since(start).Seconds())
	if err != nil {
		if cerr := contextError(ctx, err); cerr != nil {
			g.m.events.WithLabelValues(outcomeUnavailable).Add(float64(len(recs)))
			return nil, cerr
		}
		return nil, g.unavailable(len(recs), err)
	}
	outcome := outcomeKafka
	if dur == receiptsv1.Durability_SPOOLED {
		outcome = outcomeSpooled
	}
	g.m.events.WithLabelValues(outcome).Add(float64(len(recs)))

	results := make([]*receiptsv1.ReceiptResult, len(marks))
	for i := range marks {
		res := &receiptsv1.ReceiptResult{Durability: dur}
		if merged[i].Err == nil {
			res.State = event.StateToProto(merged[i].State)
			res.Advanced = merged[i].Advanced
		} else {
			// The merged state is unknown; advanced stays false.
			res.RealtimeDegraded = true
		}
		results[i] = res
	}
	return results, nil
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
		g.log.Warn("making marks durable; answering unavailable", zap.Int("num_records", n), zap.String("topic", g.cfg.Topic), zap.Error(err))
	}
	cerr := connect.NewError(connect.CodeUnavailable,
		fmt.Errorf("making %d marks durable: %w; nothing was acknowledged, retry", n, err))
	cerr.Meta().Set("Retry-After", g.retryAfter)
	return cerr
}

// mergeRedis max-merges the states in one pipeline under RedisTimeout. It
// always returns one result per state; failures are per result.
func (g *Gate) mergeRedis(ctx context.Context, states []receipt.State) []redisstore.MergeResult {
	rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	defer cancel()
	merged, err := g.redis.Merge(rctx, states)
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
