package threads

import (
	"context"
	"errors"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// HeadSpec is a thread's head: a max-register of the greatest reply seq
// notified (thread.MergeHead), one thread_heads row and a field of the
// channel's Redis thread head hash. It belongs to no user.
var HeadSpec = &kind.Spec[thread.Ref, thread.Head]{
	Name: "thread_heads",
	Key:  func(h thread.Head) thread.Ref { return h.Ref },
	// (channel_id, root_seq): the page walk's order.
	Compare: func(a, b thread.Head) int { return a.Ref.Compare(b.Ref) },
	// A thread head travels on its channel's events.
	RecordKey: func(r thread.Ref) string { return receipt.EscapeKeyID(r.Channel) },
	Time:      func(h thread.Head) int64 { return h.UpdatedAtUnixMs },
	Zero:      func(r thread.Ref) thread.Head { return thread.Head{Ref: r} },
	Empty:     func(h thread.Head) bool { return h.Seq == 0 },
	Merge:     func(_ *kind.Env, a, b thread.Head) thread.Head { m, _ := thread.MergeHead(a, b); return m },
	Same:      func(a, b thread.Head) bool { return a.Seq == b.Seq },
	FromEvent: func(d *event.Decoded) (thread.Head, bool) {
		if d.ThreadHead == nil {
			return thread.Head{}, false
		}
		return *d.ThreadHead, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []thread.Head) (int64, error) {
		return storeOf(env).WriteHeadsPG(ctx, vals)
	},
	PGGet: func(ctx context.Context, env *kind.Env, refs []thread.Ref) ([]thread.Head, error) {
		return storeOf(env).HeadsPG(ctx, refs)
	},
	PGPage: func(ctx context.Context, env *kind.Env, after thread.Ref, hasAfter bool, n int) ([]thread.Head, error) {
		return storeOf(env).HeadsPagePG(ctx, after, hasAfter, n)
	},

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []thread.Head) ([]error, error) {
		res, err := storeOf(env).RaiseHeads(ctx, vals)
		return kind.ResultErrs(res, err, func(r HeadResult) error { return r.Err })
	},
	RedisGet: func(ctx context.Context, env *kind.Env, refs []thread.Ref) ([][]*thread.Head, error) {
		got, err := storeOf(env).HeadsRedis(ctx, refs)
		if err != nil {
			return nil, err
		}
		out := make([][]*thread.Head, len(refs))
		for i, r := range refs {
			out[i] = []*thread.Head{nil}
			if h, ok := got[r]; ok {
				out[i][0] = &h
			}
		}
		return out, nil
	},
	RedisScan: func(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[thread.Head], error) {
		chs, next, err := storeOf(env).ScanChannels(ctx, cur, count)
		if err != nil {
			return kind.ScanPage[thread.Head]{}, err
		}
		page := kind.ScanPage[thread.Head]{Next: next}
		for _, ch := range kind.ValidIDs("channel_id", chs, &page.Scanned, &page.Invalid) {
			heads, err := storeOf(env).ChannelHeads(ctx, ch)
			if err != nil {
				return page, err
			}
			for _, h := range heads {
				if h.Validate() != nil {
					page.Invalid++
					continue
				}
				page.Values = append(page.Values, h)
			}
		}
		return page, nil
	},
	Scripts: Scripts,
}

// StateSpec is a user's register in a thread: cursors, follow and
// mentions (thread.Merge), one thread_states row and a field of the
// user's Redis thread hash.
var StateSpec = &kind.Spec[thread.Key, thread.State]{
	Name: "thread_states",
	Key:  func(st thread.State) thread.Key { return st.Key },
	// (user_id, channel_id, root_seq): the page walk's order.
	Compare: func(a, b thread.State) int { return a.Key.Compare(b.Key) },
	// A user's thread events share the partition of the user's channel
	// events, so that they keep their order.
	RecordKey: func(k thread.Key) string { return k.ChannelKey().KafkaKey() },
	User:      func(k thread.Key) string { return k.User },
	Time:      thread.State.Time,
	Zero:      func(k thread.Key) thread.State { return thread.State{Key: k} },
	Empty:     thread.State.IsZero,
	Merge: func(env *kind.Env, a, b thread.State) thread.State {
		m, _ := thread.Merge(a, b, env.MentionCapOrDefault())
		return m
	},
	Same: thread.Same,
	FromEvent: func(d *event.Decoded) (thread.State, bool) {
		if d.Thread == nil {
			return thread.State{}, false
		}
		return *d.Thread, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []thread.State) (int64, error) {
		if env.UpsertThreadStates != nil {
			return env.UpsertThreadStates(ctx, vals)
		}
		return storeOf(env).WriteStatesPG(ctx, vals)
	},
	PGGet: func(ctx context.Context, env *kind.Env, keys []thread.Key) ([]thread.State, error) {
		return storeOf(env).StatesPG(ctx, keys)
	},
	PGPage: func(ctx context.Context, env *kind.Env, after thread.Key, hasAfter bool, n int) ([]thread.State, error) {
		return storeOf(env).StatesPagePG(ctx, after, hasAfter, n)
	},

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []thread.State) ([]error, error) {
		// A register not followed, absent from a hash the gateway
		// collected (registers past the per-user bound), is absent on
		// purpose: a write looks it up in Postgres. It is not put back.
		users := make([]string, len(vals))
		for i, st := range vals {
			users[i] = st.Key.User
		}
		collected, err := storeOf(env).Collected(ctx, users)
		if err != nil {
			return nil, err
		}
		var put []thread.State
		var at []int
		for i, st := range vals {
			if !collected[st.Key.User] || st.Follow.Following {
				put, at = append(put, st), append(at, i)
			}
		}
		errs := make([]error, len(vals))
		if len(put) == 0 {
			return errs, nil
		}
		res, err := storeOf(env).MergeStates(ctx, put)
		perr, err := kind.ResultErrs(res, err, func(r StateResult) error { return r.Err })
		for j, i := range at {
			if j < len(perr) {
				errs[i] = perr[j]
			}
		}
		return errs, err
	},
	RedisGet: func(ctx context.Context, env *kind.Env, keys []thread.Key) ([][]*thread.State, error) {
		got, err := storeOf(env).StatesRedis(ctx, keys)
		if err != nil {
			return nil, err
		}
		out := make([][]*thread.State, len(keys))
		for i := range keys {
			out[i] = []*thread.State{got[i]}
		}
		return out, nil
	},
	RedisScan: func(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[thread.State], error) {
		users, next, err := storeOf(env).ScanUsers(ctx, cur, count)
		if err != nil {
			return kind.ScanPage[thread.State]{}, err
		}
		page := kind.ScanPage[thread.State]{Next: next}
		for _, u := range kind.ValidIDs("user_id", users, &page.Scanned, &page.Invalid) {
			states, _, err := storeOf(env).UserThreads(ctx, u, "")
			if errors.Is(err, ErrTooMany) {
				// The store refuses to read the hash whole; one stuck user
				// must not stop the sweep. Its registers are still compared
				// by the Postgres walk.
				page.Invalid++
				continue
			}
			if err != nil {
				return page, err
			}
			for _, st := range states {
				if st.Validate() != nil {
					page.Invalid++
					continue
				}
				if !st.IsZero() {
					page.Values = append(page.Values, st)
				}
			}
		}
		return page, nil
	},
	Scripts: Scripts,
	// An erasure leaves the user's hash empty and complete, so a read
	// never falls back to rows not deleted yet; its fields name the
	// channels the erasure cleans (a thread's moves in the channel view).
	PGErase:            eraseSQL,
	ErasedHashes:       func(env *kind.Env, user string) []string { return []string{storeOf(env).RedisKey(user)} },
	ErasedNameChannels: true,
}

// The kinds with their types erased, as the registry (pkg/kinds) lists
// them.
var (
	HeadKind  = kind.New(HeadSpec)
	StateKind = kind.New(StateSpec)
)

// storeOf is the kinds' storage on env, with env's retention.
func storeOf(env *kind.Env) Store {
	return NewStore(env.Postgres, env.Redis).WithMentionCap(env.MentionCapOrDefault())
}
