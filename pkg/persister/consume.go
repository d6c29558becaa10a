package persister

// Consuming: the poller fills windows and hands them to the writer, and
// settled offsets are committed; a rebalance waits until every window in
// hand is settled.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

type topicPartition struct {
	topic     string
	partition int32
}

// handoff is a window and what cut it.
type handoff struct {
	w       *window
	trigger string
}

// pollLoop fills windows and hands them to the writer until ctx ends or
// the client is closed; a window in hand at the end is handed over too
// (the writer finishes it on procCtx).
func (p *Persister) pollLoop(ctx, procCtx context.Context) error {
	for {
		w, trigger, err := p.fill(ctx)
		if w.len() > 0 {
			// Blocks while the writer is busy: the window is full, or it
			// must be settled now (a rebalance or the shutdown waits).
			p.inflight.Add(1)
			if !p.handOver(procCtx, handoff{w: w, trigger: trigger}) {
				p.inflight.Done()
				p.log.Warn("abandoning a window uncommitted: the drain timed out", zap.Int("num_records", w.len()))
				return err
			}
		}
		if err != nil || ctx.Err() != nil {
			return err
		}
		if trigger == triggerRevoke {
			// Every window handed over is written (or the drain ends):
			// the revoke callback commits what the committer has not.
			p.waitSettled(procCtx)
			// A signal that arrives meanwhile costs at most one more
			// (harmless) barrier: never drain it, or a new rebalance
			// could be missed.
			p.cl.AllowRebalance()
		}
	}
}

// handOver gives h to the writer, waiting while it is busy; false means
// procCtx ended first. A busy writer's wait sorts the window; a free
// writer sorts it while the poller polls the next.
func (p *Persister) handOver(procCtx context.Context, h handoff) bool {
	select {
	case p.windows <- h:
		return true
	default:
	}
	h.w.sort()
	select {
	case p.windows <- h:
		return true
	case <-procCtx.Done():
		return false
	}
}

// waitSettled waits until the writer has settled every window handed to
// it, or ctx ends.
func (p *Persister) waitSettled(ctx context.Context) {
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// fill polls into a new window until it must be handed over, and says why:
// it is full (count); the linger since its first records ran out and the
// writer is free (linger); a rebalance waits on us (revoke); or ctx ended
// (shutdown). While the writer is busy, a lingered window keeps growing.
// An error means the client is closed.
func (p *Persister) fill(ctx context.Context) (*window, string, error) {
	w := newWindow(min(p.cfg.BatchRecords, 4096), p.cfg.Kinds, p.env)
	select {
	case <-p.blocked:
		// A rebalance came while the last window was handed over.
		return w, triggerRevoke, nil
	default:
	}
	stop := ctx
	ctx, cancelFill := context.WithCancel(ctx)
	defer cancelFill()
	p.mu.Lock()
	p.cancelPoll = cancelFill
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.cancelPoll = nil
		p.mu.Unlock()
	}()
	var lingerEnd time.Time
	for {
		if stop.Err() != nil {
			return w, triggerShutdown, nil
		}
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if w.len() > 0 {
			// Wait for more records only until the linger ends; past it,
			// briefly, so the hand-off is retried soon.
			wait := max(time.Until(lingerEnd), time.Millisecond)
			pollCtx, cancel = context.WithTimeout(ctx, wait)
		}
		recs, err := p.pollOnce(pollCtx, min(p.cfg.MaxPollRecords, p.cfg.BatchRecords-w.len()))
		cancel()
		if err != nil {
			return w, "", err
		}
		if len(recs) > 0 {
			p.rate.add(len(recs), time.Now())
			if w.len() == 0 {
				linger := p.cfg.lingerAt(p.rate.perSecond())
				lingerEnd = time.Now().Add(linger)
				if p.onLinger != nil && linger > 0 {
					p.onLinger()
				}
			}
			p.m.consumed.Add(float64(len(recs)))
			w.add(recs)
		}
		select {
		case <-p.blocked:
			return w, triggerRevoke, nil
		default:
		}
		switch {
		case w.len() >= p.cfg.BatchRecords:
			return w, triggerCount, nil
		case w.len() > 0 && !time.Now().Before(lingerEnd):
			// Hand over at once if the writer is free; otherwise widen.
			p.inflight.Add(1)
			select {
			case p.windows <- handoff{w: w, trigger: triggerLinger}:
				return newWindow(0, p.cfg.Kinds, p.env), "", nil
			default:
				p.inflight.Done()
			}
		}
	}
}

// pollOnce polls up to limit records, waiting at most until ctx ends.
func (p *Persister) pollOnce(ctx context.Context, limit int) ([]*kgo.Record, error) {
	fs := p.cl.PollRecords(ctx, limit)
	return p.take(fs)
}

// take returns the records of fetches, logging partition errors (kgo
// retries them itself); it fails only when the client is closed.
func (p *Persister) take(fs kgo.Fetches) ([]*kgo.Record, error) {
	var closed error
	fs.EachError(func(topic string, partition int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kgo.ErrClientClosed):
			closed = fmt.Errorf("polling %s: %w", p.cfg.Topic, err)
		default:
			p.log.Warn("fetching", zap.String("topic", topic), zap.Int32("partition", partition), zap.Error(err))
		}
	})
	return fs.Records(), closed
}

// writeLoop settles the windows the poller hands over, one at a time, in
// order. After ctx ends (the drain timed out) it only receives, so the
// poller never blocks on a writer that gave up.
func (p *Persister) writeLoop(ctx context.Context) {
	for h := range p.windows {
		if ctx.Err() == nil {
			if err := p.settle(ctx, h.w, h.trigger); err != nil {
				// Only the end of ctx stops a settle: nothing of this
				// window is committed, so its partitions' next owner
				// replays it, and the max-merge makes that harmless.
				p.log.Warn("abandoning the window in hand uncommitted", zap.Int("num_records", h.w.len()), zap.Error(err))
			}
		}
		p.inflight.Done()
	}
}

// settleOffsets records a written window's offsets for the committer.
func (p *Persister) settleOffsets(recs []*kgo.Record) {
	p.mu.Lock()
	for _, r := range recs {
		tp := topicPartition{r.Topic, r.Partition}
		if cur := p.settled[tp]; cur == nil || cur.Offset < r.Offset {
			p.settled[tp] = r
		}
	}
	p.mu.Unlock()
	select {
	case p.commitReq <- struct{}{}:
	default:
	}
}

// commitLoop commits settled offsets as they come, off the write path, so
// the next window's statements start at once. A failed commit is retried
// after commitRetry even when no new window comes (a quiet topic would
// otherwise keep showing lag).
func (p *Persister) commitLoop(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.commitReq:
		case <-retry:
		}
		retry = nil
		if !p.commitSettled(ctx) && ctx.Err() == nil {
			retry = time.After(commitRetry)
		}
	}
}

// commitRetry spaces the retries of a failed offset commit.
const commitRetry = time.Second

// commitSettled commits every settled offset and says whether it did (or
// had nothing to do). A failed commit leaves the offsets settled for the
// next commit or the revoke; a replay is harmless.
func (p *Persister) commitSettled(ctx context.Context) bool {
	p.mu.Lock()
	toCommit := make([]*kgo.Record, 0, len(p.settled))
	for _, r := range p.settled {
		toCommit = append(toCommit, r)
	}
	p.mu.Unlock()
	if len(toCommit) == 0 {
		return true
	}
	if err := p.cl.CommitRecords(ctx, toCommit...); err != nil {
		p.m.commitErrors.Inc()
		p.log.Warn("committing offsets; retrying, and they go with the next window or on revoke", zap.Error(err))
		return false
	}
	p.m.commits.Inc()
	p.mu.Lock()
	for _, r := range toCommit {
		tp := topicPartition{r.Topic, r.Partition}
		if p.settled[tp] == r {
			delete(p.settled, tp)
		}
	}
	p.mu.Unlock()
	return true
}

// onRevoked commits what is settled on the revoked partitions before they
// move. With BlockRebalanceOnPoll it runs only between batches, so no
// batch is ever half done here.
func (p *Persister) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	recs := p.takeSettled(revoked)
	if len(recs) == 0 {
		return
	}
	if err := cl.CommitRecords(ctx, recs...); err != nil {
		p.m.commitErrors.Inc()
		p.log.Warn("committing offsets on revoke; the next owner replays from the last commit", zap.Error(err))
		return
	}
	p.m.commits.Inc()
}

// onLost drops what is settled on lost partitions: the group has moved on,
// a commit would fail or rewind another member's.
func (p *Persister) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if recs := p.takeSettled(lost); len(recs) > 0 {
		p.log.Warn("partitions lost with offsets uncommitted; the next owner replays them", zap.Int("num_partitions", len(recs)))
	}
}

func (p *Persister) takeSettled(parts map[string][]int32) []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*kgo.Record
	for topic, ps := range parts {
		for _, part := range ps {
			tp := topicPartition{topic, part}
			if r := p.settled[tp]; r != nil {
				out = append(out, r)
				delete(p.settled, tp)
			}
		}
	}
	return out
}

func (p *Persister) onBlocked(context.Context, *kgo.Client) {
	select {
	case p.blocked <- struct{}{}:
	default:
	}
	p.mu.Lock()
	if p.cancelPoll != nil {
		p.cancelPoll()
	}
	p.mu.Unlock()
}

// rateMeter estimates records/s over whole seconds: the count of the last
// complete second (a gap of more than one second reads as 0).
type rateMeter struct {
	start time.Time
	count int
	last  float64
}

func (r *rateMeter) add(n int, now time.Time) {
	switch el := now.Sub(r.start); {
	case r.start.IsZero() || el > 2*time.Second:
		r.start, r.count, r.last = now, 0, 0
	case el >= time.Second:
		r.last = float64(r.count) / el.Seconds()
		r.start, r.count = now, 0
	}
	r.count += n
}

func (r *rateMeter) perSecond() float64 { return r.last }
