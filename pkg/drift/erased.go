package drift

import (
	"context"
	"fmt"

	"github.com/readstate/receipts/pkg/tombstone"
)

// The sweep never writes an erased user back. Before a page's repairs are
// written, the tombstones of their users are read from both stores (one
// query, one pipeline): while Redis holds a newer erasure than Postgres
// (the gateway erased the user in Redis and has not applied it to
// Postgres yet), every repair of the user waits, because Postgres still holds the rows
// the erasure will delete; afterwards, a value that may predate the
// erasure by its time (tombstone.Predates) is not copied into Postgres. A
// value without a time (a mention set) follows the first rule and is
// never copied once its user was erased. Into Redis, once no erasure is
// pending, only a value older than the erasure is held back (a write that
// raced it): Postgres applied every erasure Redis knows of, deleting the
// rows then held, and what it holds since passed the erasure rule
// (tombstone.Drops, by generation) on its way there, so a Redis that lost
// its data gets back the writes that followed an erasure within the clock
// skew too. (The gateway applies an erasure to Postgres before it
// acknowledges it, so Redis cannot lose one Postgres lacks.)

// erasures is what the sweep knows of a page's users' erasures.
type erasures struct {
	latest  tombstone.Set
	pending map[string]bool
}

// erasuresOf reads the tombstones of users from Postgres and Redis.
func (s *Sweeper) erasuresOf(ctx context.Context, users []string) (erasures, error) {
	out := erasures{latest: tombstone.Set{}, pending: map[string]bool{}}
	if len(users) == 0 {
		return out, nil
	}
	pg, err := s.cfg.Postgres.Tombstones(ctx, users)
	if err != nil {
		return out, fmt.Errorf("reading postgres tombstones: %w", err)
	}
	rd, err := s.cfg.Redis.Tombstones(ctx, users)
	if err != nil {
		return out, fmt.Errorf("reading redis tombstones: %w", err)
	}
	for u, t := range rd {
		if t.Generation > pg[u].Generation {
			out.pending[u] = true
		}
		out.latest.Add(t)
	}
	for _, t := range pg {
		out.latest.Add(t)
	}
	return out, nil
}

// skips reports whether a repair of user's value last accepted at atMs
// (0: it carries no time) must not be written; toRedis: into Redis.
func (e erasures) skips(user string, atMs int64, toRedis bool) bool {
	if e.pending[user] {
		return true
	}
	t, ok := e.latest[user]
	if toRedis {
		return ok && (atMs <= 0 || atMs < t.ErasedAtUnixMs)
	}
	return ok && (atMs <= 0 || t.Predates(atMs))
}

// dropErased applies the erasure rules to a page's repairs and returns
// how many it dropped. State that belongs to no user is never dropped.
func (s *Sweeper) dropErased(ctx context.Context, w *work) (int, error) {
	k := w.kind
	seen := map[string]bool{}
	var users []string
	for _, l := range [][]any{w.toPG, w.toRedis} {
		for _, v := range l {
			if u := k.UserOf(k.KeyOf(v)); u != "" && !seen[u] {
				seen[u] = true
				users = append(users, u)
			}
		}
	}
	if len(users) == 0 {
		return 0, nil
	}
	e, err := s.erasuresOf(ctx, users)
	if err != nil || len(e.latest) == 0 && len(e.pending) == 0 {
		return 0, err
	}
	keep := func(vals []any, dirs []string, toRedis bool) ([]any, []string, int) {
		var kv []any
		var kd []string
		for i, v := range vals {
			if u := k.UserOf(k.KeyOf(v)); u != "" && e.skips(u, k.TimeOf(v), toRedis) {
				continue
			}
			kv, kd = append(kv, v), append(kd, dirs[i])
		}
		return kv, kd, len(vals) - len(kv)
	}
	var a, b int
	w.toPG, w.dirPG, a = keep(w.toPG, w.dirPG, false)
	w.toRedis, w.dirRedis, b = keep(w.toRedis, w.dirRedis, true)
	return a + b, nil
}
