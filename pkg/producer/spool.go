package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/spool"
)

const (
	// spoolReserve is kept from a caller's own deadline for the spool's
	// append, so a caller with a short deadline still gets SPOOLED rather
	// than DeadlineExceeded.
	spoolReserve = 250 * time.Millisecond
)

// spoolWriter makes a call's records durable in Kafka or, when Kafka does
// not ack them within the bound, in the local spool (fsynced; the replayer
// sends them on). A call is acknowledged only if Kafka acked every record
// or the spool fsynced every record.
//
// The circuit: once a call had to spool because Kafka failed, later calls
// spool at once, without waiting out the bound each, until the replayer
// has delivered a batch to Kafka again. Calls then try Kafka first again
// while the replayer drains the backlog; every store max-merges, so a mark
// that reaches Kafka before an older spooled one of the same key is
// harmless.
type spoolWriter struct {
	kafka *kafkaWriter
	sp    *spool.Spool
	// after bounds a call's wait for Kafka: min(SpoolAfter, ProduceTimeout).
	after time.Duration
	m     *metrics
	log   *zap.Logger
	open  atomic.Bool
}

// Write tries Kafka (unless the circuit is open), then the spool.
//
// Records of a call that gave up on Kafka may still be in kgo's buffer or
// in flight and land in Kafka later; they are spooled too, so they are
// durable either way and at worst written twice (consumers max-merge).
func (w *spoolWriter) Write(ctx context.Context, recs []*kgo.Record) (Durability, error) {
	var (
		kafkaErr error
		trip     bool
	)
	if !w.open.Load() {
		bound := w.after
		shortened := false
		if dl, ok := ctx.Deadline(); ok {
			if rem := time.Until(dl) - spoolReserve; rem < bound {
				bound, shortened = rem, true
			}
		}
		if bound > 0 {
			kctx, cancel := context.WithTimeout(ctx, bound)
			dur, err := w.kafka.Write(kctx, recs)
			cancel()
			if err == nil {
				return dur, nil
			}
			if ctx.Err() != nil {
				// The caller is gone: nothing is acknowledged, so nothing
				// needs the spool.
				return Unacknowledged, err
			}
			kafkaErr = err
			if kafkaconf.Classify(err) != errclass.Unavailable {
				// Not an outage (authorization, a refused record): the
				// spool still keeps the marks durable, but waiting will
				// not fix it, so say so loudly.
				w.log.Error("kafka refuses the records for good; spooling them until an operator fixes it", zap.Error(err))
			}
			// A wait the caller's deadline cut short says nothing about
			// Kafka; an error before the bound does.
			trip = !shortened || !errors.Is(err, context.DeadlineExceeded)
		}
	}
	err := w.append(recs)
	// A full spool trips the circuit too (later calls are refused before
	// touching Redis), but only when it holds records whose replay will
	// close it again.
	full := errors.Is(err, spool.ErrFull)
	if trip && (err == nil || full && w.sp.Stats().Records > 0) && !w.open.Swap(true) {
		w.m.spoolCircuitOpen.Set(1)
		w.log.Warn("kafka did not ack in time; spooling every call until a replay succeeds",
			zap.Duration("bound", w.after), zap.Error(kafkaErr))
	}
	if err != nil {
		if !full && w.open.CompareAndSwap(true, false) {
			// The spool itself fails (not full): try Kafka first again
			// rather than refusing every call.
			w.m.spoolCircuitOpen.Set(0)
		}
		if kafkaErr != nil {
			err = fmt.Errorf("%w; then %w", kafkaErr, err)
		}
		return Unacknowledged, err
	}
	return Spooled, nil
}

// append writes all records in one Append: one group, one fsync.
func (w *spoolWriter) append(recs []*kgo.Record) error {
	srecs := make([]spool.Record, len(recs))
	for i, r := range recs {
		srecs[i] = spoolRecord(r)
	}
	err := w.sp.Append(srecs...)
	if errors.Is(err, spool.ErrFull) {
		w.m.spoolFull.Inc()
	}
	return err
}

// refuse fails fast, before Redis is touched, a call that is bound for the
// spool (circuit open) and cannot fit in it. Append still decides; this
// only spares Redis a value that is about to be refused.
func (w *spoolWriter) refuse(recs []*kgo.Record) error {
	if !w.open.Load() {
		return nil
	}
	size := int64(spoolSegmentHeader)
	for _, r := range recs {
		size += int64(spool.FrameSize(spoolRecord(r)))
	}
	st := w.sp.Stats()
	if st.Bytes+size <= st.MaxBytes {
		return nil
	}
	w.m.spoolFull.Inc()
	return fmt.Errorf("spooling %d records (%d bytes) with %d of %d bytes in use: %w", len(recs), size, st.Bytes, st.MaxBytes, spool.ErrFull)
}

// delivered closes the circuit: Kafka acked a replayed batch.
func (w *spoolWriter) delivered() {
	if w.open.CompareAndSwap(true, false) {
		w.m.spoolCircuitOpen.Set(0)
		w.log.Info("kafka acks replayed records again; calls produce to kafka first")
	}
}

// hasRoom reports whether the spool can take a typical call: free bytes of
// at least 64 KiB (a full 500-mark batch is about 50 KiB), or half of a
// smaller spool.
func (w *spoolWriter) hasRoom() error {
	st := w.sp.Stats()
	need := min(64<<10, st.MaxBytes/2)
	if free := st.MaxBytes - st.Bytes; free < need {
		return fmt.Errorf("%d of %d bytes in use (%d records): %w", st.Bytes, st.MaxBytes, st.Records, spool.ErrFull)
	}
	return nil
}

// spoolRecord is r as the spool keeps it: key, value and headers (the
// trace context: the replayed record stays in its trace). Headers past the
// spool's bounds (spool.MaxHeaders, spool.MaxHeaderBytes) are dropped, the
// first ones kept (traceparent comes before tracestate): a caller's
// oversized trace state never costs the mark itself.
func spoolRecord(r *kgo.Record) spool.Record {
	sr := spool.Record{Key: r.Key, Value: r.Value}
	if len(r.Headers) == 0 {
		return sr
	}
	sr.Headers = make([]spool.Header, 0, min(len(r.Headers), spool.MaxHeaders))
	size := 0
	for _, h := range r.Headers {
		n := spool.HeaderOverhead + len(h.Key) + len(h.Value)
		if len(sr.Headers) == spool.MaxHeaders || size+n > spool.MaxHeaderBytes {
			continue
		}
		sr.Headers = append(sr.Headers, spool.Header{Key: h.Key, Value: h.Value})
		size += n
	}
	return sr
}

// kafkaHeaders are a spooled record's headers as a Kafka record's.
func kafkaHeaders(hs []spool.Header) []kgo.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return out
}
