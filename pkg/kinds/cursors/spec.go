package cursors

import (
	"context"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// spec is a user's read, private read and delivered cursors in a
// channel: a max-register per cursor (receipt.Merge), one read_receipts
// row and one field of the user's Redis hash.
var spec = &kind.Spec[receipt.Key, receipt.State]{
	Name:      "read_receipts",
	Key:       func(s receipt.State) receipt.Key { return s.Key },
	Compare:   receipt.CompareStates,
	RecordKey: receipt.Key.KafkaKey,
	User:      func(k receipt.Key) string { return k.User },
	Time:      func(s receipt.State) int64 { return s.UpdatedAtUnixMs },
	Zero:      func(k receipt.Key) receipt.State { return receipt.State{Key: k} },
	Empty: func(s receipt.State) bool {
		return s.Read.Position.IsZero() && s.Delivered.Position.IsZero() && s.PrivateRead.Position.IsZero()
	},
	Merge: func(_ *kind.Env, a, b receipt.State) receipt.State { m, _ := receipt.Merge(a, b); return m },
	Same:  receipt.State.SameCursors,

	Scripts:            scripts,
	ErasedHashes:       func(env *kind.Env, user string) []string { return []string{storeOf(env).RedisKey(user)} },
	ErasedNameChannels: true,
	PGErase:            eraseSQL,
	PGChannels:         channelsSQL,
	FromEvent: func(d *event.Decoded) (receipt.State, bool) {
		if d.Receipt == nil {
			return receipt.State{}, false
		}
		return *d.Receipt, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []receipt.State) (int64, error) {
		return NewPostgres(env.Postgres).Upsert(ctx, vals)
	},
	PGGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([]receipt.State, error) {
		return NewPostgres(env.Postgres).GetKeys(ctx, keys)
	},
	PGPage: func(ctx context.Context, env *kind.Env, after receipt.Key, _ bool, n int) ([]receipt.State, error) {
		return NewPostgres(env.Postgres).Page(ctx, after, n)
	},

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []receipt.State) ([]error, error) {
		res, err := storeOf(env).Merge(ctx, vals)
		return kind.ResultErrs(res, err, func(r MergeResult) error { return r.Err })
	},
	RedisGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([][]*receipt.State, error) {
		// One pipeline for the page's users (a round trip per user cost
		// the sweep most of its CPU in syscalls).
		var reqs []UserChannels
		for _, k := range keys {
			if n := len(reqs); n == 0 || reqs[n-1].User != k.User {
				reqs = append(reqs, UserChannels{User: k.User})
			}
			reqs[len(reqs)-1].Channels = append(reqs[len(reqs)-1].Channels, k.Channel)
		}
		got, err := storeOf(env).GetMany(ctx, reqs)
		if err != nil {
			return nil, err
		}
		held := make(map[receipt.Key]*receipt.State, len(keys))
		for i := range got {
			for j := range got[i].States {
				held[got[i].States[j].Key] = &got[i].States[j]
			}
		}
		out := make([][]*receipt.State, len(keys))
		for i, k := range keys {
			out[i] = []*receipt.State{held[k]}
		}
		return out, nil
	},
	RedisScan: func(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[receipt.State], error) {
		users, next, err := storeOf(env).ScanUsers(ctx, cur, count)
		if err != nil {
			return kind.ScanPage[receipt.State]{}, err
		}
		page := kind.ScanPage[receipt.State]{Next: next}
		var reqs []UserChannels
		for _, u := range kind.ValidIDs("user_id", users, &page.Scanned, &page.Invalid) {
			reqs = append(reqs, UserChannels{User: u})
		}
		got, err := storeOf(env).GetMany(ctx, reqs)
		if err != nil {
			return page, err
		}
		for _, g := range got {
			for _, st := range g.States {
				if st.Validate() != nil {
					page.Invalid++
					continue
				}
				page.Values = append(page.Values, st)
			}
		}
		return page, nil
	},
}

// Kind is the cursors' kind.
var Kind = kind.New(spec)

func storeOf(env *kind.Env) Store { return NewStore(env.Redis) }
