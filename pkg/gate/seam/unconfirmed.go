package seam

import (
	"context"
	"fmt"
	"slices"

	"github.com/readstate/receipts/pkg/redisstore"
)

// Writes Redis' replicas have not confirmed yet.
//
// With Config.ReplicaAcks a write is answered only once the replicas took
// it (or answered degraded when they did not), but the master serves it
// from the moment it merged, and its record may be in Postgres before the
// wait is over. Two hazards follow, each closed here:
//
//   - A read that shows the write while the replicas lack it can be
//     followed, after a failover, by one that does not. So while a user
//     has such a write in flight, a read of the user's cursors waits for
//     the replicas too (ConfirmRead) and, when they fall short, answers
//     Unavailable (a failed read promises nothing).
//   - A later write of the user could merge, on a promoted replica without
//     the first, before the first is noted degraded. So a read or a
//     mark-unread of the user waits, before anything else
//     (SettleDegraded), until the earlier writes' waits are over and their
//     users noted; the marks' flush, which must not stall behind the
//     previous one, merges at once and, before it answers, turns its
//     results for users an earlier write left degraded into degraded ones
//     too (DegradedBy).

// UnconfirmedWrite is one registration of Unconfirmed; done closes once
// its wait for the replicas is over, degraded (set before) holding the
// users it left degraded.
type UnconfirmedWrite struct {
	id       uint64
	done     chan struct{}
	degraded map[string]bool
}

type ticketKey struct{}

// Unconfirmed registers a write of users whose replicas have not confirmed
// it: call it before the write reaches Redis, use the returned ctx for
// the write (its own settle does not wait for itself), and call confirmed
// with the users it left degraded once the write's wait for the replicas
// is over and they are noted (NoteDegraded). A no-op without replica acks.
func (g *Core) Unconfirmed(ctx context.Context, users []string) (context.Context, func(degraded []string)) {
	if g.Cfg.ReplicaAcks <= 0 || len(users) == 0 {
		return ctx, func([]string) {}
	}
	r := g.Restore
	w := &UnconfirmedWrite{id: r.ticket.Add(1), done: make(chan struct{})}
	r.degradedMu.Lock()
	for _, u := range users {
		if r.unconfirmed[u] == nil {
			r.unconfirmed[u] = map[uint64]*UnconfirmedWrite{}
		}
		r.unconfirmed[u][w.id] = w
	}
	r.nUnconfirmed.Add(int64(len(users)))
	r.degradedMu.Unlock()
	done := false
	return context.WithValue(ctx, ticketKey{}, w.id), func(degraded []string) {
		if done {
			return
		}
		done = true
		if len(degraded) > 0 {
			w.degraded = make(map[string]bool, len(degraded))
			for _, u := range degraded {
				w.degraded[u] = true
			}
		}
		r.degradedMu.Lock()
		for _, u := range users {
			delete(r.unconfirmed[u], w.id)
			if len(r.unconfirmed[u]) == 0 {
				delete(r.unconfirmed, u)
			}
		}
		r.nUnconfirmed.Add(-int64(len(users)))
		r.degradedMu.Unlock()
		close(w.done)
	}
}

// Earlier returns the unconfirmed writes of users registered before
// ctx's own (all of them when ctx has none).
func (r *Restorer) Earlier(ctx context.Context, users []string) []*UnconfirmedWrite {
	if r.nUnconfirmed.Load() == 0 {
		return nil
	}
	own, _ := ctx.Value(ticketKey{}).(uint64)
	r.degradedMu.Lock()
	defer r.degradedMu.Unlock()
	var out []*UnconfirmedWrite
	for _, u := range users {
		for id, w := range r.unconfirmed[u] {
			if (own == 0 || id < own) && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// DegradedBy waits until the earlier writes' waits are over (bounded by
// the Redis timeout) and returns the users they left degraded; all
// reports that the bound ran out first (treat every user as degraded).
func (r *Restorer) DegradedBy(ctx context.Context, earlier []*UnconfirmedWrite) (degraded map[string]bool, all bool) {
	if len(earlier) == 0 {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, r.g.Cfg.RedisTimeout)
	defer cancel()
	for _, w := range earlier {
		select {
		case <-w.done:
			for u := range w.degraded {
				if degraded == nil {
					degraded = map[string]bool{}
				}
				degraded[u] = true
			}
		case <-ctx.Done():
			return nil, true
		}
	}
	return degraded, false
}

// awaitConfirmed returns once the users' earlier unconfirmed writes are
// over (bounded by the Redis timeout: then ErrNotReplicated, and the
// caller answers as when Redis is away).
func (r *Restorer) awaitConfirmed(ctx context.Context, users []string) error {
	if _, all := r.DegradedBy(ctx, r.Earlier(ctx, users)); all {
		return fmt.Errorf("waiting for an earlier write's replicas: %w", redisstore.ErrNotReplicated)
	}
	return nil
}

// ErrReadNotConfirmed answers a read whose answer Redis' replicas did not
// confirm: the caller answers Unavailable (not from Postgres, which may be
// behind what was acknowledged while Redis is up).
var ErrReadNotConfirmed = fmt.Errorf("the replicas did not confirm what the read found: %w", redisstore.ErrNotReplicated)

// ConfirmRead returns once Redis' replicas hold what a read of user's
// cursors just answered from the master, when the user has a write they
// have not confirmed yet; ErrReadNotConfirmed when they fell short.
func (g *Core) ConfirmRead(ctx context.Context, user string) error {
	r := g.Restore
	if r.nUnconfirmed.Load() == 0 {
		return nil
	}
	r.degradedMu.Lock()
	pending := len(r.unconfirmed[user]) > 0
	r.degradedMu.Unlock()
	if !pending {
		return nil
	}
	if lagging := g.Replicated(ctx, []string{user}); len(lagging) == 1 && lagging[0] {
		return ErrReadNotConfirmed
	}
	return nil
}

// IsDegraded reports whether user has a write acknowledged without Redis
// that SettleDegraded has not yet settled, or one still waiting for its
// replicas (which may end as one).
func (r *Restorer) IsDegraded(user string) bool {
	if r.nDegraded.Load() == 0 && r.nUnconfirmed.Load() == 0 {
		return false
	}
	r.degradedMu.Lock()
	defer r.degradedMu.Unlock()
	_, degraded := r.degraded[user]
	return degraded || len(r.unconfirmed[user]) > 0
}

// CatchUpDegraded returns once the persister has written what was on the
// topic now, when user has a write acknowledged without Redis not yet
// settled (or one that may become one): a Postgres read of the user then
// holds it, whatever Redis says of its losses.
func (r *Restorer) CatchUpDegraded(ctx context.Context, user string) error {
	if r.cfg.Barrier == nil || !r.IsDegraded(user) {
		return nil
	}
	bctx, cancel, err := r.bounded(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := r.cfg.Barrier.CatchUp(bctx); err != nil {
		return r.timedOut(bctx, fmt.Errorf("settling a degraded write: %w", err))
	}
	return nil
}
