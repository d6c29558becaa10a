package notifications

import (
	"context"
	"errors"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Spec is a user's notification register in a channel: the greater
// (version, level, mute end) wins (notification.Merge), one
// channel_notifications row and a field of the user's Redis hash.
var Spec = &kind.Spec[receipt.Key, notification.Register]{
	Name: "channel_notifications",
	Key:  func(r notification.Register) receipt.Key { return r.Key },
	// (user, channel): the order of the table's primary key.
	Compare:   Compare,
	RecordKey: receipt.Key.KafkaKey,
	User:      func(k receipt.Key) string { return k.User },
	Time:      func(r notification.Register) int64 { return r.VersionUnixMs },
	Zero:      func(k receipt.Key) notification.Register { return notification.Register{Key: k} },
	Empty:     notification.Register.IsZero,
	Merge: func(_ *kind.Env, a, b notification.Register) notification.Register {
		m, _ := notification.Merge(a, b)
		return m
	},
	Same: func(a, b notification.Register) bool { return a.Compare(b) == 0 },
	FromEvent: func(d *event.Decoded) (notification.Register, bool) {
		if d.Notifications == nil {
			return notification.Register{}, false
		}
		return *d.Notifications, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []notification.Register) (int64, error) {
		return storeOf(env).WritePG(ctx, vals)
	},
	PGGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([]notification.Register, error) {
		users, chs := kind.ByUser(keys)
		var out []notification.Register
		for _, u := range users {
			for start := 0; start < len(chs[u]); start += kind.PGGetChunk {
				rows, err := storeOf(env).ReadPG(ctx, u, chs[u][start:min(start+kind.PGGetChunk, len(chs[u]))])
				if err != nil {
					return nil, err
				}
				out = append(out, rows...)
			}
		}
		return out, nil
	},
	PGPage: func(ctx context.Context, env *kind.Env, after receipt.Key, _ bool, n int) ([]notification.Register, error) {
		return storeOf(env).PagePG(ctx, after, n)
	},
	PGErase: eraseSQL,

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []notification.Register) ([]error, error) {
		res, err := storeOf(env).MergeRedis(ctx, vals)
		return kind.ResultErrs(res, err, func(r Result) error { return r.Err })
	},
	RedisGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([][]*notification.Register, error) {
		got, err := storeOf(env).ReadRedisKeys(ctx, keys)
		if err != nil {
			return nil, err
		}
		out := make([][]*notification.Register, len(keys))
		for i := range keys {
			out[i] = []*notification.Register{got[i]}
		}
		return out, nil
	},
	RedisScan:    scanRedis,
	Scripts:      Scripts,
	ErasedHashes: func(env *kind.Env, user string) []string { return []string{storeOf(env).RedisKey(user)} },
}

// Kind is Spec with its types erased, as the registry (pkg/kinds) lists it.
var Kind = kind.New(Spec)

func storeOf(env *kind.Env) Store { return NewStore(env.Postgres, env.Redis) }

// scanRedis is one SCAN page of the users' hashes, each read whole.
func scanRedis(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[notification.Register], error) {
	s := storeOf(env)
	return kind.ScanUsers(ctx, cur, count, s.ScanRedisUsers, func(ctx context.Context, u string, page *kind.ScanPage[notification.Register]) error {
		regs, _, err := s.ReadRedis(ctx, u, nil)
		if errors.Is(err, redisstore.ErrTooManyChannels) {
			// Read whole it is over the bound; one such user must not
			// stop the sweep. The Postgres walk still compares its
			// registers.
			page.Invalid++
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range regs {
			page.Values = append(page.Values, r)
		}
		return nil
	})
}
