package producer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sethvargo/go-retry"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/kafkaconf"
)

// durableWriter makes a call's records durable, all or nothing from the
// caller's view, and says where. kafkaWriter answers Kafka or fails;
// spoolWriter (with a SpoolDir) wraps it and answers Spooled when Kafka
// fails or is slow.
type durableWriter interface {
	Write(ctx context.Context, recs []*kgo.Record) (Durability, error)
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
// Records that fail with an Unavailable error (kafkaconf.Classify) are
// produced again until the timeout: kgo fails every record buffered behind
// one that failed in the same partition (to keep ordering gapless), so
// right after an outage a fresh record can fail for an older one's sake,
// and a second try succeeds. At the timeout the call gives up; records then
// still in flight may land later, which is harmless (consumers max-merge),
// but the call is not acknowledged.
func (w *kafkaWriter) Write(ctx context.Context, recs []*kgo.Record) (Durability, error) {
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
		if kafkaconf.Classify(err) != errclass.Unavailable {
			return err
		}
		return retry.RetryableError(err)
	})
	if err != nil {
		if last != nil {
			err = last
		}
		return Unacknowledged, fmt.Errorf("producing %d records (attempt %d, %d not acked): %w", len(recs), attempts, len(pending), err)
	}
	return Kafka, nil
}

// produce sends one round and returns the records not acked (the
// originals, produced again as fresh copies) with the first error, or nil
// when all were acked.
func (w *kafkaWriter) produce(ctx context.Context, recs []*kgo.Record) ([]*kgo.Record, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	// kgo writes partition, offset and producer fields into a record:
	// each round sends fresh copies, allocated together.
	copies := make([]kgo.Record, len(recs))
	r := &round{orig: recs, copies: copies, done: make(chan struct{})}
	r.left.Store(int64(len(recs)))
	for i, o := range recs {
		copies[i] = kgo.Record{Topic: o.Topic, Key: o.Key, Value: o.Value, Headers: o.Headers}
	}
	for i := range copies {
		// One promise for the whole round (kgo takes one per record; this
		// one is a single method value, not a closure per record). It runs
		// even when Produce gives up on ctx, so the round always
		// completes; kgo bounds it with RecordDeliveryTimeout.
		w.cl.Produce(ctx, &copies[i], r.promise)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return recs, fmt.Errorf("waiting for acks: %w", ctx.Err())
	}
	return r.failed, r.first
}

// round tracks the acks of one produce round.
type round struct {
	orig   []*kgo.Record
	copies []kgo.Record
	left   atomic.Int64
	done   chan struct{}

	mu     sync.Mutex
	failed []*kgo.Record
	first  error
}

func (r *round) promise(rec *kgo.Record, err error) {
	if err != nil {
		r.mu.Lock()
		// Failures are rare: finding the copy's original by address is
		// cheaper than carrying an index with every record.
		for i := range r.copies {
			if &r.copies[i] == rec {
				r.failed = append(r.failed, r.orig[i])
				break
			}
		}
		if r.first == nil {
			r.first = err
		}
		r.mu.Unlock()
	}
	if r.left.Add(-1) == 0 {
		close(r.done)
	}
}
