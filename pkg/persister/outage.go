package persister

// Outages: a store or the dead-letter topic failing is retried, and the
// persister is not ready (and fetching paused) while an outage lasts.

import (
	"context"
	"time"

	"github.com/sethvargo/go-retry"
	"go.uber.org/zap"
)

type outage struct {
	err   error
	loops int
}

// always retries every error: the store's calls of a window are retried
// while Postgres fails, until ctx ends.
func always(error) bool { return true }

// retry runs f until it succeeds or fails with an error transient rejects,
// logging to log. While f fails with a transient error, the op is in
// outage: fetching is paused and Ready reports the error. It never gives
// up on its own (see Config.Retry); only the end of ctx stops it.
func (p *Persister) retry(ctx context.Context, log *zap.Logger, op string, transient func(error) bool, f func(context.Context) error) error {
	var attempts int
	var since time.Time
	err := retry.Do(ctx, p.cfg.Retry.New(), func(ctx context.Context) error {
		err := f(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		attempts++
		p.m.retries.WithLabelValues(op).Inc()
		if attempts == 1 {
			since = time.Now()
			log.Warn("retrying until it recovers; fetching is paused", zap.String("op", op), zap.Error(err))
		} else {
			log.Debug("still failing", zap.String("op", op), zap.Int("attempts", attempts), zap.Error(err))
		}
		p.enterOutage(op, err, attempts == 1)
		return retry.RetryableError(err)
	})
	// A loop stopped by the end of ctx leaves the outage in place: the
	// persister is stopping, and Ready keeps failing until Run returns.
	if attempts > 0 && ctx.Err() == nil {
		p.leaveOutage(op)
		log.Info("recovered", zap.String("op", op), zap.Int("attempts", attempts), zap.Duration("outage", time.Since(since)))
	}
	return err
}

// enterOutage records err for op; first is true on the first failure of
// a retry loop, which then counts until its leaveOutage.
func (p *Persister) enterOutage(op string, err error, first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.outage) == 0 {
		// The batch in hand is all this member works on until it is
		// settled; pausing stops buffering more behind it.
		p.cl.PauseFetchTopics(p.cfg.Topic)
	}
	o := p.outage[op]
	if o == nil {
		o = &outage{}
		p.outage[op] = o
	}
	o.err = err
	if first {
		o.loops++
	}
	p.m.ready.Set(0)
}

// leaveOutage ends one retry loop of op; the op's outage ends with its
// last loop.
func (p *Persister) leaveOutage(op string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.outage[op]
	if o == nil {
		return
	}
	if o.loops--; o.loops > 0 {
		return
	}
	delete(p.outage, op)
	if len(p.outage) == 0 {
		p.cl.ResumeFetchTopics(p.cfg.Topic)
		if p.running {
			p.m.ready.Set(1)
		}
	}
}

func (p *Persister) setRunning(running bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = running
	if running && len(p.outage) == 0 {
		p.m.ready.Set(1)
	} else {
		p.m.ready.Set(0)
	}
}

// lastErr is the outage's last error, or nil when there is none.
func (o *outage) lastErr() error {
	if o == nil {
		return nil
	}
	return o.err
}
