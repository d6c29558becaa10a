package producer

import (
	"context"
	"errors"
	"time"

	"github.com/sethvargo/go-retry"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/spool"
)

// Replay retry policy: unbounded by design (the spool holds the records, and
// waiting for Kafka is always right), with short capped waits so a broker
// that is back is noticed within a couple of seconds.
var replayBackoff = backoff.Config{Base: 100 * time.Millisecond, Cap: 2 * time.Second}

// replayWarnEvery rate-limits the replayer's failure log during an outage.
const replayWarnEvery = 10 * time.Second

// replayer sends the spool to Kafka in spool order, one batch at a time: a
// batch is committed (and its space given back) only after Kafka acked every
// record of it, so a crash or a stop at any point leaves the unsent records
// in the spool, and at worst sends a batch twice (consumers max-merge).
type replayer struct {
	sp        *spool.Spool
	kafka     *kafkaWriter // bounded by ProduceTimeout per attempt
	topic     string
	delivered func() // Kafka acked a batch: close the circuit
	m         *metrics
	log       *zap.Logger
}

// run replays until ctx ends, or, with untilEmpty, until the spool is
// empty. A batch being sent then is abandoned uncommitted: it stays in
// the spool for the next start.
func (r *replayer) run(ctx context.Context, untilEmpty bool) {
	var sent int64 // since the spool was last empty
	warnings := rate.Sometimes{Interval: replayWarnEvery}
	warn := func(msg string, fields ...zap.Field) {
		r.m.spoolReplayErrors.Inc()
		warnings.Do(func() { r.log.Warn(msg, fields...) })
	}
	b := replayBackoff.New()
	pause := func() bool {
		d, _ := b.Next() // never stops: unbounded by design
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		if untilEmpty && r.sp.Stats().Records == 0 {
			if sent > 0 {
				r.log.Info("spool drained to kafka", zap.Int64("num_records", sent))
			}
			return
		}
		batch, commit, err := r.sp.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, spool.ErrClosed) {
				return
			}
			// ErrCorrupt: the files changed under the running spool; only
			// a restart (Open repairs) gets past it. Appends still work.
			warn("reading the spool; retrying", zap.Error(err))
			if !pause() {
				return
			}
			continue
		}
		recs := make([]*kgo.Record, len(batch))
		for i, sr := range batch {
			recs[i] = &kgo.Record{Topic: r.topic, Key: sr.Key, Value: sr.Value, Headers: kafkaHeaders(sr.Headers)}
		}
		err = retry.Do(ctx, replayBackoff.New(), func(ctx context.Context) error {
			if _, err := r.kafka.Write(ctx, recs); err != nil {
				if ctx.Err() != nil {
					return err
				}
				warn("replaying spooled records to kafka; retrying", zap.Int("num_records", len(recs)), zap.Error(err))
				return retry.RetryableError(err)
			}
			return nil
		})
		if err != nil {
			return // only the stop ends the retry
		}
		r.delivered()
		if err := commit(); err != nil {
			if ctx.Err() != nil || errors.Is(err, spool.ErrClosed) {
				return
			}
			// The batch comes again from Next and is sent twice: harmless.
			warn("committing replayed records; sending them again", zap.Int("num_records", len(recs)), zap.Error(err))
			if !pause() {
				return
			}
			continue
		}
		b = replayBackoff.New()
		r.m.spoolReplayed.Add(float64(len(recs)))
		sent += int64(len(recs))
		if r.sp.Stats().Records == 0 {
			r.log.Info("spool replayed to kafka", zap.Int64("num_records", sent))
			sent = 0
		}
	}
}
