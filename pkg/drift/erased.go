package drift

import (
	"context"
	"fmt"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// The sweep never writes an erased user back. Before a page's repairs are
// written, the tombstones of their users are read from both stores (one
// query, one pipeline): while Redis holds a newer erasure than Postgres
// (the gateway erased the user, the persister has not applied it yet),
// every repair of the user waits, because Postgres still holds the rows
// the erasure will delete; afterwards, a cursor or register that may
// predate the erasure by its time (tombstone.Predates) is not copied
// either way. Mention sets carry no time: they follow the first rule only.

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

// skips reports whether a repair of user's state last changed at atMs
// (hasTime false: a mention set) must not be written.
func (e erasures) skips(user string, atMs int64, hasTime bool) bool {
	if e.pending[user] {
		return true
	}
	t, ok := e.latest[user]
	return ok && (!hasTime || t.Predates(atMs))
}

// keepLive drops from items (and their parallel dirs) the repairs e skips;
// it returns what is left and how many were dropped.
func keepLive[T any](e erasures, items []T, dirs []string, user func(T) string, at func(T) (int64, bool)) ([]T, []string, int) {
	if len(e.latest) == 0 && len(e.pending) == 0 {
		return items, dirs, 0
	}
	var keptItems []T
	var keptDirs []string
	for i, it := range items {
		ms, hasTime := at(it)
		if e.skips(user(it), ms, hasTime) {
			continue
		}
		keptItems, keptDirs = append(keptItems, it), append(keptDirs, dirs[i])
	}
	return keptItems, keptDirs, len(items) - len(keptItems)
}

func stateUser(st receipt.State) string           { return st.Key.User }
func stateTime(st receipt.State) (int64, bool)    { return st.UpdatedAtUnixMs, true }
func regUser(m channel.Membership) string         { return m.Key.User }
func regTime(m channel.Membership) (int64, bool)  { return m.VersionUnixMs, true }
func mentionsUser(m channel.Mentions) string      { return m.Key.User }
func mentionsTime(channel.Mentions) (int64, bool) { return 0, false }

// usersOf lists the distinct users of some repairs.
func usersOf(lists ...[]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lists {
		for _, u := range l {
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

func usersOfStates(states []receipt.State) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = st.Key.User
	}
	return out
}

// dropErasedCursors applies the erasure rules to a page's cursor repairs.
func (s *Sweeper) dropErasedCursors(ctx context.Context, pr *pageResult) (int, error) {
	if len(pr.toPG) == 0 && len(pr.toRedis) == 0 {
		return 0, nil
	}
	e, err := s.erasuresOf(ctx, usersOf(usersOfStates(pr.toPG), usersOfStates(pr.toRedis)))
	if err != nil {
		return 0, err
	}
	var a, b int
	pr.toPG, pr.dirPG, a = keepLive(e, pr.toPG, pr.dirPG, stateUser, stateTime)
	pr.toRedis, pr.dirRedis, b = keepLive(e, pr.toRedis, pr.dirRedis, stateUser, stateTime)
	return a + b, nil
}

// dropErasedChannelState applies the erasure rules to a page's register
// and mention repairs (heads belong to no user).
func (s *Sweeper) dropErasedChannelState(ctx context.Context, w *chanWork) (int, error) {
	var users []string
	for _, l := range [][]channel.Membership{w.regsPG, w.regsRedis} {
		for _, m := range l {
			users = append(users, m.Key.User)
		}
	}
	for _, l := range [][]channel.Mentions{w.mentionsPG, w.mentionsRedis} {
		for _, m := range l {
			users = append(users, m.Key.User)
		}
	}
	if len(users) == 0 {
		return 0, nil
	}
	e, err := s.erasuresOf(ctx, usersOf(users))
	if err != nil {
		return 0, err
	}
	var n [4]int
	w.regsPG, w.regsPGDir, n[0] = keepLive(e, w.regsPG, w.regsPGDir, regUser, regTime)
	w.regsRedis, w.regsRedisDir, n[1] = keepLive(e, w.regsRedis, w.regsRedisDir, regUser, regTime)
	w.mentionsPG, w.mentionsPGDir, n[2] = keepLive(e, w.mentionsPG, w.mentionsPGDir, mentionsUser, mentionsTime)
	w.mentionsRedis, w.mentionsRdir, n[3] = keepLive(e, w.mentionsRedis, w.mentionsRdir, mentionsUser, mentionsTime)
	return n[0] + n[1] + n[2] + n[3], nil
}
