package persister

// Erasures: a window's erasures are applied before its rows, the events
// that predate an erasure are dropped, and an erasure applied elsewhere
// while the window was written is taken back.

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
	"github.com/readstate/receipts/pkg/views/readby"
)

// tombstoneChunk bounds the users of one tombstone lookup.
const tombstoneChunk = 10_000

// applyErasures applies the window's erasures (each deletes the user's
// rows and raises the tombstone in one transaction), then looks up the
// tombstones of the window's users (one query per tombstoneChunk users)
// and drops the events that predate them, so a replay, a spool replayed
// late or an event produced before the erasure never writes an erased
// user back. The erasures go first: a window holding an erasure and the
// user's later marks writes those marks after it. It retries while
// Postgres fails (an erasure is never dead-lettered: it was validated on
// decode); an error means ctx ended. It returns the tombstones found and
// the erasure clock read before the lookup, for takeBackRaced.
func (p *Persister) applyErasures(ctx context.Context, w *window) (tombs tombstone.Set, clock int64, err error) {
	users := make([]string, 0, len(w.erasures))
	for u := range w.erasures {
		users = append(users, u)
	}
	slices.Sort(users)
	for _, u := range users {
		t := w.erasures[u]
		var deleted int64
		var advanced bool
		err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
			var err error
			deleted, advanced, err = p.store.Erase(ctx, t, p.erasure())
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("applying the erasure of %s: %w", u, err)
		}
		p.log.Info("erasure applied", zap.String("user_id", u), zap.Int64("generation", t.Generation),
			zap.Bool("advanced", advanced), zap.Int64("rows_deleted", deleted))
	}

	// Read before the lookup: an erasure committed after it moves the
	// clock, which takeBackRaced checks once the rows are written.
	err = p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
		var err error
		clock, err = p.store.ErasureClock(ctx)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reading the erasure clock: %w", err)
	}
	users = w.users()
	tombs, err = p.tombstones(ctx, users)
	if err != nil {
		return nil, 0, err
	}
	if err := p.applyStamped(ctx, w, tombs); err != nil {
		return nil, 0, err
	}
	if p.onTombstones != nil {
		p.onTombstones(users)
	}
	p.dropErased(w, tombs)
	return tombs, clock, nil
}

// applyStamped applies, before the window's rows are written, each
// erasure its events name that Postgres has not applied yet: an event
// stamped with a generation above the user's tombstone was ordered after
// that erasure in Redis, whose record travels on another partition
// ("u::user") and may come in a later window. Applied then, the erasure
// would delete the rows written from this window (acknowledged writes
// that follow it); applied now, it deletes only what predates it, and its
// record later moves nothing but the time (pgstore.Erase). The time taken
// is the earliest acceptance among the stamped events, which the real
// erasure preceded in Redis (tombstone.Drops orders by generation first).
func (p *Persister) applyStamped(ctx context.Context, w *window, tombs tombstone.Set) error {
	for _, u := range slices.Sorted(maps.Keys(w.stamps)) {
		t := w.stamps[u]
		if t.Generation <= tombs[u].Generation {
			continue
		}
		var deleted int64
		err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
			var err error
			deleted, _, err = p.store.Erase(ctx, t, p.erasure())
			return err
		})
		if err != nil {
			return fmt.Errorf("applying the erasure of %s its events are stamped with: %w", u, err)
		}
		tombs.Add(t)
		p.log.Info("erasure applied ahead of its record, from the generation its user's events carry", zap.String("user_id", u),
			zap.Int64("generation", t.Generation), zap.Int64("rows_deleted", deleted))
	}
	return nil
}

// tombstones looks up the tombstones of users, one query per
// tombstoneChunk users.
func (p *Persister) tombstones(ctx context.Context, users []string) (tombstone.Set, error) {
	tombs := tombstone.Set{}
	for _, part := range chunk(users, tombstoneChunk) {
		err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
			got, err := p.store.Tombstones(ctx, part)
			for _, t := range got {
				tombs.Add(t)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("looking up the tombstones of a window: %w", err)
		}
	}
	return tombs, nil
}

// dropErased drops the window's events that predate their user's erasure
// and makes the written cache forget the erased users' keys.
func (p *Persister) dropErased(w *window, tombs tombstone.Set) {
	if len(tombs) == 0 {
		return
	}
	// What this replica wrote for an erased user's keys before the erasure
	// says nothing of Postgres now.
	var stale []receipt.Key
	for _, r := range w.cursorRows() {
		if _, ok := tombs[r.Key.User]; ok {
			stale = append(stale, r.Key)
		}
	}
	p.written.forget(stale)
	if dropped := w.dropErased(tombs); dropped > 0 {
		p.m.erasedDropped.Add(float64(dropped))
		p.log.Info("dropped events that predate their user's erasure", zap.Int("num_events", dropped), zap.Int("num_erased_users", len(tombs)))
	}
}

// takeBackRaced runs once a window's rows are committed. Unless the
// erasure clock moved since the tombstone lookup (clock), nothing was
// erased meanwhile, and an erasure still to come deletes what was
// written. Otherwise it looks the tombstones up again: for each user
// erased since (an erasure the dlt-reconciler or another replica applied
// first, whose deletes ran before this window's rows were written), it
// deletes the user's rows again (pgstore.EraseAgain) and drops the
// window's events that predate the erasure; it returns those users, whose
// surviving rows the caller writes again, and advances clock and tombs.
// An error means ctx ended.
func (p *Persister) takeBackRaced(ctx context.Context, w *window, clock *int64, tombs tombstone.Set) (tombstone.Set, error) {
	var now int64
	err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
		var err error
		now, err = p.store.ErasureClockSettled(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the erasure clock: %w", err)
	}
	if now == *clock {
		return nil, nil
	}
	*clock = now
	latest, err := p.tombstones(ctx, w.users())
	if err != nil {
		return nil, err
	}
	raced := tombstone.Set{}
	for u, t := range latest {
		if t.Generation > tombs[u].Generation {
			raced.Add(t)
			tombs.Add(t)
		}
	}
	users := slices.Sorted(maps.Keys(raced))
	for _, u := range users {
		var deleted int64
		err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
			var err error
			deleted, err = p.store.EraseAgain(ctx, u, p.erasure())
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("erasing %s again: %w", u, err)
		}
		p.m.erasuresRaced.Inc()
		p.log.Warn("an erasure was applied while the window was written: its user's rows are deleted again and what follows the erasure is written again",
			zap.String("user_id", u), zap.Int64("generation", raced[u].Generation), zap.Int64("rows_deleted", deleted))
	}
	p.dropErased(w, raced)
	return raced, nil
}

// erasure is the Postgres part of an erasure: the kinds' statements and
// the read-by view's move log.
func (p *Persister) erasure() pgstore.Erasure {
	return kind.PGErasure(p.cfg.Kinds).And(readby.MoveLogErasure)
}
