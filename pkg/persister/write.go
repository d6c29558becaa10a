package persister

// Writing: a window's parts become statements over the kinds of state,
// run Writers at a time; rejected rows' records go to the dead-letter
// topic, and only then are the offsets settled.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// settle writes one window: every record ends in Postgres or acked on the
// dead-letter topic, then its offsets are handed to the committer. It
// returns an error only when ctx ends first; then nothing of the window is
// committed.
func (p *Persister) settle(ctx context.Context, w *window, trigger string) (err error) {
	ctx, end := p.windowSpan(ctx, w, trigger)
	defer func() { end(err) }()
	start := time.Now()
	p.m.batches.WithLabelValues(trigger).Inc()
	p.m.batchSize.Observe(float64(w.len()))

	// Dead letters go out before the rows are written so that a poison
	// record never waits on a Postgres outage.
	for _, dl := range w.undecodable {
		p.log.Warn("dead-lettering an undecodable record", recordFields(dl.src, errors.New(dl.reason))...)
	}
	if err := p.produceDead(ctx, w.undecodable, kindUndecodable); err != nil {
		return err
	}

	tombs, clock, err := p.applyErasures(ctx, w)
	if err != nil {
		return err
	}

	decoded := w.len() - len(w.undecodable)
	total := w.rowCount()
	p.m.dedupeIn.Add(float64(decoded))
	p.m.dedupeOut.Add(float64(total))
	var feed *changeSink
	if p.cfg.ChangesTopic != "" {
		feed = &changeSink{}
	}
	p.feed.Store(feed)
	written, skipped, failed, err := p.writeRows(ctx, w, feed)
	if err != nil {
		return fmt.Errorf("writing window of %d rows: %w", total, err)
	}
	p.m.staleSkipped.Add(float64(skipped))
	if decoded > 0 {
		p.m.dedupeRatio.Set(1 - float64(total-skipped)/float64(decoded))
	}
	// An erasure applied by another process (the dlt-reconciler, another
	// replica) after the tombstone lookup may have missed rows written
	// since: take them back and write again what survives it.
	for {
		raced, err := p.takeBackRaced(ctx, w, &clock, tombs)
		if err != nil {
			return err
		}
		if len(raced) == 0 {
			break
		}
		n, _, f, err := p.writeRows(ctx, w.ofUsers(raced), feed)
		if err != nil {
			return fmt.Errorf("writing again the rows of %d users erased meanwhile: %w", len(raced), err)
		}
		written += n
		if len(f) > 0 && failed == nil {
			failed = map[rejection]error{}
		}
		maps.Copy(failed, f)
	}
	if len(failed) > 0 {
		// A rejected row merged every record of its key into that table,
		// so all of them go: the reconciler merges them again.
		rejected := w.sourcesOf(failed)
		for _, dl := range rejected {
			p.log.Warn("dead-lettering a record Postgres rejects", recordFields(dl.src, errors.New(dl.reason))...)
		}
		if err := p.produceDead(ctx, rejected, kindRejected); err != nil {
			return err
		}
	}

	// The change feed goes after the database commit and before the
	// offsets: a crash between replays the window, which emits again.
	if err := p.produceChanges(ctx, feed); err != nil {
		return err
	}

	// Every row is in Postgres (or its records acked on the dead-letter
	// topic): only now may the offsets move.
	p.settleOffsets(w.offsets())
	p.log.Debug("window settled", zap.String("trigger", trigger), zap.Int("num_records", w.len()),
		zap.Int("num_rows", total), zap.Int("num_written", written), zap.Int("num_undecodable", len(w.undecodable)),
		zap.Int("num_rejected_rows", len(failed)), zap.Duration("duration", time.Since(start)))
	return nil
}

// writeRows writes a window's parts, every kind's statements Writers at
// a time, then the retention of the kinds that have one. The cursors take
// their own path (cursorJobs: the written cache, bulk COPY, the change
// feed and the cursor-move log). It returns the rows written, the cursor
// rows skipped as not ahead of what this replica wrote, and the rejected
// rows; an error means ctx ended.
func (p *Persister) writeRows(ctx context.Context, w *window, feed *changeSink) (written, skipped int, failed map[rejection]error, err error) {
	var jobs, trims []job
	for i, k := range w.kinds {
		if k == kinds.Cursors {
			rows := w.cursorRows()
			fresh := p.written.filter(rows)
			skipped = len(rows) - len(fresh)
			jobs = append(jobs, cursorJobs(p, i, fresh, feed)...)
			jobs = append(jobs, p.moveJobs(fresh)...)
			continue
		}
		jobs = append(jobs, partJobs(p, i, w.parts[i])...)
		trims = append(trims, trimJobs(p, w.parts[i])...)
	}
	written, failed, err = p.runJobs(ctx, jobs)
	if err != nil {
		return 0, 0, nil, err
	}
	if _, _, err := p.runJobs(ctx, trims); err != nil {
		return 0, 0, nil, fmt.Errorf("applying the retention of a window's kinds: %w", err)
	}
	return written, skipped, failed, nil
}

// job is one statement of a window: it writes its rows (bisecting a
// rejected one out), retrying while Postgres is unavailable, and returns
// how many rows it wrote and the rejected ones; an error means ctx ended.
type job func(ctx context.Context, slot int) (int, map[rejection]error, error)

// cursorJobs are the statements of a window's cursor rows: StatementRows
// each, with UpsertBulk (COPY) from stagedMinRows; each remembers what it
// wrote in the written cache.
func cursorJobs(p *Persister, kind int, rows []receipt.State, feed *changeSink) []job {
	var out []job
	for _, part := range chunk(rows, p.cfg.StatementRows) {
		out = append(out, func(ctx context.Context, slot int) (int, map[rejection]error, error) {
			upsert := cursors.NewPostgres(p.store).Upsert
			if len(part) >= stagedMinRows {
				upsert = p.upsertBulk
			}
			if feed != nil {
				upsert = feed.upsert(p.store)
			}
			res, err := batch.Bisect(part, func(sub []receipt.State) error {
				return p.statement(ctx, slot, len(sub), func(ctx context.Context) error { _, err := upsert(ctx, sub); return err })
			}, isRejected)
			// Counted as each statement commits: a statement stays written
			// even when another one's is abandoned.
			p.m.rowsWritten.Add(float64(len(res.Written)))
			p.written.remember(res.Written)
			return len(res.Written), rejections(kind, part, res.Failed, func(s receipt.State) string { return s.Key.KafkaKey() }), err
		})
	}
	return out
}

// partJobs are the statements of one kind's part of a window.
func partJobs(p *Persister, kind int, part kind.Part) []job {
	var out []job
	for _, st := range part.Statements(p.cfg.StatementRows) {
		out = append(out, func(ctx context.Context, slot int) (int, map[rejection]error, error) {
			idx := make([]int, st.Len())
			for i := range idx {
				idx[i] = i
			}
			// Bisect splits contiguous ranges: sub is idx[lo:hi].
			res, err := batch.Bisect(idx, func(sub []int) error {
				return p.statement(ctx, slot, len(sub), func(ctx context.Context) error {
					_, err := st.Write(ctx, sub[0], sub[len(sub)-1]+1)
					return err
				})
			}, isRejected)
			p.m.rowsWritten.Add(float64(len(res.Written)))
			return len(res.Written), rejections(kind, idx, res.Failed, st.RecordKey), err
		})
	}
	return out
}

// trimJobs apply a kind's retention to the keys of its part (none for
// most kinds). The retention only bounds the table (readers apply it
// themselves), so a rejection, which the statement cannot meet, is
// logged and left to the next window of the key.
func trimJobs(p *Persister, part kind.Part) []job {
	var out []job
	for _, trim := range part.Trims(p.cfg.StatementRows) {
		out = append(out, func(ctx context.Context, slot int) (int, map[rejection]error, error) {
			var n int64
			// A trim writes no rows: it pays nothing to the write cap.
			err := p.statement(ctx, slot, 0, func(ctx context.Context) error {
				var err error
				n, err = trim(ctx)
				return err
			})
			if err != nil && ctx.Err() == nil {
				p.log.Warn("applying a kind's retention", zap.Error(err))
				err = nil
			}
			p.m.mentionsTrimmed.Add(float64(n))
			return 0, nil, err
		})
	}
	return out
}

func rejections[T any](kind int, part []T, failed []batch.Failure, key func(T) string) map[rejection]error {
	if len(failed) == 0 {
		return nil
	}
	out := make(map[rejection]error, len(failed))
	for _, f := range failed {
		out[rejection{kind, key(part[f.Index])}] = f.Err
	}
	return out
}

// write puts the sorted, deduplicated cursor rows of a window in
// Postgres (see runJobs) and returns the count written and the rejected
// keys: the cursor table alone, as settle writes it beside the others.
func (p *Persister) write(ctx context.Context, rows []receipt.State) (int, map[receipt.Key]error, error) {
	written, failed, err := p.runJobs(ctx, cursorJobs(p, slices.Index(p.cfg.Kinds, kinds.Cursors), rows, nil))
	if err != nil {
		return 0, nil, err
	}
	var out map[receipt.Key]error
	for r, e := range failed {
		if out == nil {
			out = map[receipt.Key]error{}
		}
		k, _ := receipt.ParseKafkaKey(r.key)
		out[k] = e
	}
	return written, out, nil
}

// runJobs runs a window's statements (one implicit transaction each),
// Writers at a time. Statements hold disjoint key ranges of their table,
// so they never wait on each other's row locks (nor deadlock). A rejected
// row is isolated within its statement by batch.Bisect; an outage is
// retried by each statement on its own, so one already committed is never
// written again. It returns when every statement is settled, with the
// count of rows written and the rejected rows; an error means ctx ended
// first, and the window must not be committed.
func (p *Persister) runJobs(ctx context.Context, jobs []job) (int, map[rejection]error, error) {
	if len(jobs) == 0 {
		return 0, nil, nil
	}
	start := time.Now()
	defer func() { p.m.writeTime.Observe(time.Since(start).Seconds()) }()
	written := make([]int, len(jobs))
	failed := make([]map[rejection]error, len(jobs))
	errs := make([]error, len(jobs))
	var next atomic.Int64
	work := func(slot int) {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(jobs) || ctx.Err() != nil {
				return
			}
			written[i], failed[i], errs[i] = jobs[i](ctx, slot)
		}
	}
	if workers := min(p.cfg.Writers, len(jobs)); workers == 1 {
		work(0)
	} else {
		var wg sync.WaitGroup
		for slot := range workers {
			wg.Go(func() { work(slot) })
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	var total int
	var rejected map[rejection]error
	for i := range jobs {
		if errs[i] != nil {
			// Only the end of ctx stops a statement.
			return 0, nil, fmt.Errorf("writing statement %d: %w", i, errs[i])
		}
		total += written[i]
		for r, e := range failed[i] {
			if rejected == nil {
				rejected = map[rejection]error{}
			}
			rejected[r] = e
		}
	}
	return total, rejected, nil
}

// chunk splits rows into consecutive slices of at most n.
func chunk[T any](rows []T, n int) [][]T {
	out := make([][]T, 0, (len(rows)+n-1)/n)
	for start := 0; start < len(rows); start += n {
		out = append(out, rows[start:min(start+n, len(rows)):min(start+n, len(rows))])
	}
	return out
}

// askRowsFor is how long bulk statements ask Postgres which keys have a row
// after the written cache's guess missed (a restart onto a full table, keys
// written by another replica, or evicted from the cache).
const askRowsFor = 30 * time.Second

// upsertBulk writes a bulk statement's rows: the keys this replica wrote
// have a row, and, unless a guess missed lately, every other key is taken
// to have none and COPYed without asking Postgres (a miss costs a COPY cut
// short and the batch's merge by Upsert's statement).
func (p *Persister) upsertBulk(ctx context.Context, rows []receipt.State) (int64, error) {
	if !p.written.enabled() || time.Now().UnixNano() < p.askRowsUntil.Load() {
		return cursors.NewPostgres(p.store).UpsertBulk(ctx, rows)
	}
	n, missed, err := cursors.NewPostgres(p.store).UpsertBulkGuessed(ctx, rows, p.written.has)
	if missed {
		p.m.bulkGuessMissed.Inc()
		p.askRowsUntil.Store(time.Now().Add(askRowsFor).UnixNano())
	}
	return n, err
}

// stagedMinRows is the statement size from which UpsertBulk (COPY of the
// new rows in key order) beats the parameter arrays (BENCHMARKS.md).
var stagedMinRows = 1000

// statement runs one statement writing rows rows, retrying for as long
// as Postgres is unavailable. It returns nil, a rejection (for Bisect to
// split), or the end of ctx. With MaxWriteRate it first waits for the
// rows' share of the cap (retries of the statement do not pay again).
func (p *Persister) statement(ctx context.Context, slot, rows int, f func(context.Context) error) error {
	if err := p.wcap.wait(ctx, rows); err != nil {
		return fmt.Errorf("waiting for --max-write-rate: %w", err)
	}
	return p.retry(ctx, p.stmtLogs[slot], opUpsert, isUpsertRetryable, func(ctx context.Context) error {
		start := time.Now()
		err := f(ctx)
		p.m.upsertTime.Observe(time.Since(start).Seconds())
		if pgstore.Classify(err) == errclass.Permanent {
			p.stmtLogs[slot].Error("postgres refuses the write for good; the partition waits for an operator", zap.Error(err))
		}
		return err
	})
}

// deadLetter is a record to send to the dead-letter topic and why.
type deadLetter struct {
	src    *kgo.Record
	reason string
}

// produceDead sends the dead letters and waits for every ack, retrying the
// failed ones for as long as the topic is unavailable.
func (p *Persister) produceDead(ctx context.Context, dls []deadLetter, kind string) error {
	if len(dls) == 0 {
		return nil
	}
	pending := dls
	err := p.retry(ctx, p.log, opDeadLetter, isProduceRetryable, func(ctx context.Context) error {
		// Fresh records each attempt: kgo owns a record until its promise
		// runs, and only the failed ones are sent again.
		recs := make([]*kgo.Record, len(pending))
		index := make(map[*kgo.Record]int, len(pending))
		for i, dl := range pending {
			recs[i] = event.DeadLetter(dl.src, p.cfg.DLTTopic, dl.reason)
			index[recs[i]] = i
		}
		// Results come in completion order, not input order.
		results := p.cl.ProduceSync(ctx, recs...)
		var failed []deadLetter
		var err error
		dropped := 0
		for _, r := range results {
			switch {
			case r.Err == nil:
			case tooLarge(r.Err):
				// Refused for its size even bounded (event.DeadLetter): no
				// retry can help, and retrying would stall the partition
				// for good. Skipped, loudly; the source offset locates
				// the record while the topic retains it.
				dl := pending[index[r.Record]]
				dropped++
				p.m.deadLettersDropped.Inc()
				p.log.Error("the dead-letter topic refuses a dead letter as too large; skipping it (the source record stays on its topic until retention)",
					append(recordFields(dl.src, r.Err), zap.String("dlt_topic", p.cfg.DLTTopic), zap.String("reason", dl.reason))...)
			default:
				failed = append(failed, pending[index[r.Record]])
				if err == nil {
					err = r.Err
				}
			}
		}
		p.m.deadLetters.WithLabelValues(kind).Add(float64(len(pending) - len(failed) - dropped))
		pending = failed
		if class := kafkaconf.Classify(err); class == errclass.Rejected || class == errclass.Permanent {
			p.log.Error("kafka refuses dead letters for good; the partition waits for an operator",
				zap.String("dlt_topic", p.cfg.DLTTopic), zap.Int("num_records", len(pending)), zap.Error(err))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("producing %d dead letters to %s: %w", len(pending), p.cfg.DLTTopic, err)
	}
	return nil
}

// tooLarge reports a produce refused for the record's size (by the broker's
// max.message.bytes or the client's batch bound): permanent for that
// record, whatever else is wrong.
func tooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// isUnavailable retries while Postgres is unavailable only (a setting that
// disagrees is not an outage).
func isUnavailable(err error) bool {
	return !errors.Is(err, pgstore.ErrSettingDisagrees) && pgstore.Classify(err) == errclass.Unavailable
}

// isRejected tells Bisect which rows to isolate: those Postgres refuses.
func isRejected(err error) bool { return pgstore.Classify(err) == errclass.Rejected }

// isUpsertRetryable keeps retrying a write while Postgres is unavailable,
// and also when it refuses the operation for good (a missing table, bad
// credentials): dead-lettering good rows could only lose them, so the
// partition waits, with /readyz false and the error logged, until an
// operator acts.
func isUpsertRetryable(err error) bool {
	class := pgstore.Classify(err)
	return class == errclass.Unavailable || class == errclass.Permanent
}

// isProduceRetryable keeps retrying a dead letter whatever Kafka answers,
// even an error kafkaconf.Classify calls rejected or permanent — except
// a refusal for its size (tooLarge), which produceDead skips: the record
// has nowhere else to go, and its offset must not be committed until it is
// in Postgres or on the dead-letter topic. The partition stalls with
// /readyz false and the error logged (loudly when permanent) until an
// operator acts; only our own shutdown stops it.
func isProduceRetryable(err error) bool { return kafkaconf.Classify(err) != errclass.Canceled }

func recordFields(r *kgo.Record, err error) []zap.Field {
	return []zap.Field{
		zap.String("topic", r.Topic), zap.Int32("partition", r.Partition),
		zap.Int64("offset", r.Offset), zap.Error(err),
	}
}
