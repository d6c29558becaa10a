package seam

import (
	"context"
	"fmt"

	"github.com/readstate/receipts/pkg/redisstore"
)

// Writes Redis' replicas have not confirmed yet.
//
// With Config.ReplicaAcks a write is answered only once the replicas took
// it (or answered degraded when they did not), but the master serves it
// to every read from the moment it merged. A read that shows it while the
// replicas have not taken it can be followed, after a failover to a
// replica without it, by one that does not: the answers went back. So
// while a user has such a write in flight, a read of the user's cursors
// waits for the replicas too (ConfirmRead) and, when they fall short,
// answers Unavailable instead (a failed read promises nothing).

// Unconfirmed counts writes of users in flight until their replicas
// confirm them: call it before the write reaches Redis, and the returned
// func once the write's wait for the replicas is over and any degraded
// user noted (NoteDegraded). A no-op without replica acks.
func (g *Core) Unconfirmed(users []string) (confirmed func()) {
	if g.Cfg.ReplicaAcks <= 0 || len(users) == 0 {
		return func() {}
	}
	r := g.Restore
	r.degradedMu.Lock()
	for _, u := range users {
		r.unconfirmed[u]++
	}
	r.nUnconfirmed.Add(int64(len(users)))
	r.degradedMu.Unlock()
	done := false
	return func() {
		if done {
			return
		}
		done = true
		r.degradedMu.Lock()
		for _, u := range users {
			if r.unconfirmed[u]--; r.unconfirmed[u] <= 0 {
				delete(r.unconfirmed, u)
			}
		}
		r.nUnconfirmed.Add(-int64(len(users)))
		r.degradedMu.Unlock()
	}
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
	pending := r.unconfirmed[user] > 0
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
// that SettleDegraded has not yet settled.
func (r *Restorer) IsDegraded(user string) bool {
	if r.nDegraded.Load() == 0 {
		return false
	}
	r.degradedMu.Lock()
	defer r.degradedMu.Unlock()
	return r.degraded[user]
}

// CatchUpDegraded returns once the persister has written what was on the
// topic now, when user has a write acknowledged without Redis not yet
// settled: a Postgres read of the user then holds it, whatever Redis says
// of its losses.
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
