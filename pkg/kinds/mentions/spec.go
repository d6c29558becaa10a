package mentions

import (
	"context"
	"slices"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Spec is the set of message seqs that mention a user in a channel: a
// set union kept to the newest cap+1 (channel.MergeMentions), one
// mentions row per seq and a field of the user's Redis mention hash. A
// set carries no time.
var Spec = &kind.Spec[receipt.Key, channel.Mentions]{
	Name:      "mentions",
	Key:       func(m channel.Mentions) receipt.Key { return m.Key },
	Compare:   func(a, b channel.Mentions) int { return a.Key.Compare(b.Key) },
	RecordKey: receipt.Key.KafkaKey,
	User:      func(k receipt.Key) string { return k.User },
	Time:      func(channel.Mentions) int64 { return 0 },
	Zero:      func(k receipt.Key) channel.Mentions { return channel.Mentions{Key: k} },
	Empty:     func(m channel.Mentions) bool { return len(m.Seqs) == 0 },
	Merge: func(env *kind.Env, a, b channel.Mentions) channel.Mentions {
		k := a.Key
		if k == (receipt.Key{}) {
			k = b.Key
		}
		return channel.Mentions{Key: k, Seqs: channel.MergeMentions(a.Seqs, b.Seqs, env.MentionCapOrDefault())}
	},
	Same: func(a, b channel.Mentions) bool { return slices.Equal(a.Seqs, b.Seqs) },
	Rows: func(m channel.Mentions) int { return len(m.Seqs) },
	FromEvent: func(d *event.Decoded) (channel.Mentions, bool) {
		if len(d.Mentions) == 0 {
			return channel.Mentions{}, false
		}
		return channel.Mentions{Key: d.Key, Seqs: d.Mentions}, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []channel.Mentions) (int64, error) {
		return storeOf(env).WritePG(ctx, vals)
	},
	PGTrim: func(ctx context.Context, env *kind.Env, vals []channel.Mentions) (int64, error) {
		keys := make([]receipt.Key, len(vals))
		for i, m := range vals {
			keys[i] = m.Key
		}
		return storeOf(env).TrimPG(ctx, keys)
	},
	PGGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([]channel.Mentions, error) {
		users, chs := kind.ByUser(keys)
		var out []channel.Mentions
		for _, u := range users {
			rows, err := storeOf(env).ReadPG(ctx, u, chs[u])
			if err != nil {
				return nil, err
			}
			out = append(out, rows...)
		}
		return out, nil
	},
	PGPage: func(ctx context.Context, env *kind.Env, after receipt.Key, _ bool, n int) ([]channel.Mentions, error) {
		return storeOf(env).PagePG(ctx, after, n)
	},
	PGErase: eraseSQL,

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []channel.Mentions) ([]error, error) {
		return nil, storeOf(env).AddRedis(ctx, vals)
	},
	RedisGet: func(ctx context.Context, env *kind.Env, keys []receipt.Key) ([][]*channel.Mentions, error) {
		seqs, err := storeOf(env).ReadRedis(ctx, keys)
		if err != nil {
			return nil, err
		}
		out := make([][]*channel.Mentions, len(keys))
		for i, k := range keys {
			out[i] = []*channel.Mentions{nil}
			if seqs[i] != nil {
				out[i][0] = &channel.Mentions{Key: k, Seqs: seqs[i]}
			}
		}
		return out, nil
	},
	RedisScan: scanRedis,
	Scripts:   Scripts,
	// Left empty and complete: a mention added after the erasure's
	// script read the new generation must survive it, and a read must not
	// fall back to Postgres rows not deleted yet.
	ErasedHashes: func(env *kind.Env, user string) []string { return []string{storeOf(env).RedisKey(user)} },
}

// Kind is Spec with its types erased, as the registry (pkg/kinds) lists it.
var Kind = kind.New(Spec)

// storeOf is the kind's storage on env, with env's retention.
func storeOf(env *kind.Env) Store {
	return NewStore(env.Postgres, env.Redis).WithMentionCap(env.MentionCapOrDefault())
}

// scanRedis is one SCAN page of the users' mentions.
func scanRedis(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[channel.Mentions], error) {
	s := storeOf(env)
	return kind.ScanUsers(ctx, cur, count, s.ScanRedisUsers, func(ctx context.Context, u string, page *kind.ScanPage[channel.Mentions]) error {
		ms, _, err := s.UserRedis(ctx, u)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if receipt.ValidateID("channel_id", m.Key.Channel) != nil {
				page.Invalid++
				continue
			}
			if len(m.Seqs) > 0 {
				page.Values = append(page.Values, m)
			}
		}
		return nil
	})
}
