package threadcalls

import (
	"cmp"
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/tracing"
)

// Thread registers are bounded per user, whoever writes them: a reply
// that mentions a user makes the user follow its thread, so other users
// could otherwise grow one user's registers past what a read may load
// and lock the user out of their counts. When a write leaves a user with
// more than Config.ThreadsPerUser registers in Redis, the gateway
// collects the user's least recently active ones down to 90 % of it:
// the followed among them are unfollowed (a durable write, as the user's
// own unfollow would be), then dropped from Redis and the hash marked
// collected. A register absent from a collected hash is looked up in
// Postgres before a write (restoreCollected), so no answer goes back; the
// reads (thread lists, counts, the inbox) read the bounded hash.

// threadsKept is what a collection leaves: room for the next writes
// before another.
func (g *registers) threadsKept() int { return g.Cfg.ThreadsPerUser * 9 / 10 }

// threadCollectTimeout bounds one collection.
const threadCollectTimeout = 30 * time.Second

// collectThreadsOf collects, in the background, the thread registers of
// the users past the bound. One collection per user at a time.
func (g *Threads) collectThreadsOf(ctx context.Context, users []string) {
	if len(users) == 0 {
		return
	}
	users = slices.Compact(slices.Sorted(slices.Values(users)))
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), threadCollectTimeout)
		defer cancel()
		counts, err := g.ThreadStore().Counts(cctx, users)
		if err != nil {
			return
		}
		for i, u := range users {
			if counts[i] <= int64(g.Cfg.ThreadsPerUser) {
				continue
			}
			_, _, _ = g.collecting.Do(u, func() (any, error) {
				return nil, g.collectThreads(cctx, u)
			})
		}
	}()
}

// collectThreads brings the user's registers down to threadsKept.
func (g *Threads) collectThreads(ctx context.Context, user string) error {
	states, err := g.ThreadStore().AllUserThreads(ctx, user, 4*threads.MaxUserThreads)
	if err != nil || len(states) <= g.Cfg.ThreadsPerUser {
		return err
	}
	// The inactive first, then the least recently active.
	slices.SortFunc(states, func(a, b thread.State) int {
		if a.Follow.Following != b.Follow.Following {
			if a.Follow.Following {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Time(), b.Time())
	})
	victims := states[:len(states)-g.threadsKept()]
	var follows []thread.Key
	for _, st := range victims {
		if st.Follow.Following {
			follows = append(follows, st.Key)
		}
	}
	// Before anything is dropped: a restore of a dropped register waits
	// until the persister has written what the gateway wrote of it.
	if err := g.Restore.FenceUser(ctx, user); err != nil {
		return err
	}
	now := g.NowMs()
	drop := slices.Clone(victims)
	if len(follows) > 0 {
		res, _, _, err := g.writeThreads(ctx, follows, nil, func(_ int, stored thread.State) (thread.State, error) {
			return thread.State{Key: stored.Key, Follow: thread.Follow{Following: false, VersionUnixMs: max(now, stored.Follow.VersionUnixMs+1)}}, nil
		})
		if err != nil {
			return err
		}
		// The unfollows are durable now, after the fence above: again.
		if err := g.Restore.FenceUser(ctx, user); err != nil {
			return err
		}
		after := make(map[thread.Key]thread.State, len(res))
		for _, r := range res {
			if r.Err == nil {
				after[r.State.Key] = r.State
			}
		}
		for i, st := range drop {
			if st.Follow.Following {
				if a, ok := after[st.Key]; ok {
					drop[i] = a
				} else {
					drop[i] = thread.State{} // not unfollowed: kept
				}
			}
		}
		drop = slices.DeleteFunc(drop, func(st thread.State) bool { return st.Key.User == "" })
	}
	n, err := g.ThreadStore().Collect(ctx, user, drop)
	if err != nil {
		return err
	}
	g.M.ThreadsCollected.Add(float64(n))
	tracing.Logger(ctx, g.Log).Info("collected thread registers past the bound", zap.Int("registers", len(states)), zap.Int("dropped", n), zap.Int("unfollowed", len(follows)))
	return nil
}

// restoreCollected reads from Postgres the registers of keys (absent from
// collected hashes) and merges them into Redis; it returns the keys as
// known for the write that follows (a key without a row is new).
func (g *registers) restoreCollected(ctx context.Context, keys []thread.Key) (map[thread.Key]bool, error) {
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k.User] {
			seen[k.User] = true
			if _, err := g.Restore.UserFence(ctx, k.User); err != nil {
				return nil, err
			}
		}
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	rows, err := g.ThreadStore().StatesPG(pctx, keys)
	cancel()
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		_, err := g.ThreadStore().MergeStates(ctx, rows)
		if err != nil {
			return nil, err
		}
	}
	known := make(map[thread.Key]bool, len(keys))
	for _, k := range keys {
		known[k] = true
	}
	return known, nil
}

// restoreThreads restores a user's thread registers.
func (g *registers) restoreThreads(ctx context.Context, user string) error {
	return g.RestoreUserHash(ctx, "t\x00"+user, g.ThreadStore().RedisKey(user), "threads", func(ctx context.Context, inc redisstore.Incarnation) error {
		_, err := g.hydrateThreads(ctx, user, inc)
		return err
	})
}

// hydrateThreads reads a user's registers from Postgres and restores the
// hash with them under inc; the rows are returned also when Redis did
// not take them (err then says why).
func (g *registers) hydrateThreads(ctx context.Context, user string, inc redisstore.Incarnation) ([]thread.State, error) {
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	rows, err := g.ThreadStore().UserStatesPG(pctx, user, "", g.Cfg.ThreadsPerUser+1)
	cancel()
	if err != nil {
		return nil, err
	}
	collected := len(rows) > g.Cfg.ThreadsPerUser
	if collected {
		// More than Redis keeps: the most recently followed, and the hash
		// marked collected (a register absent from it is looked up in
		// Postgres before a write: threadcollect.go).
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		rows, err = g.ThreadStore().RecentStatesPG(pctx, user, g.threadsKept())
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if collected {
		if err := g.ThreadStore().MarkCollected(ctx, user); err != nil {
			return rows, err
		}
	}
	return rows, g.ThreadStore().HydrateUser(ctx, user, rows, inc)
}
