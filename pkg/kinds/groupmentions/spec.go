package groupmentions

import (
	"context"
	"slices"
	"strings"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Spec is a channel's group mentions: the messages that
// mention every member but their sender, a set union kept to the newest
// cap+1 (channel.MergeGroupMentions), one channel_group_mentions row per
// seq and a Redis sorted set per channel. It belongs to no user (like a
// head) and carries no time.
var Spec = &kind.Spec[string, channel.GroupMentions]{
	Name:      "channel_group_mentions",
	Key:       func(g channel.GroupMentions) string { return g.Channel },
	Compare:   func(a, b channel.GroupMentions) int { return strings.Compare(a.Channel, b.Channel) },
	RecordKey: receipt.EscapeKeyID,
	Time:      func(channel.GroupMentions) int64 { return 0 },
	Zero:      func(ch string) channel.GroupMentions { return channel.GroupMentions{Channel: ch} },
	Empty:     func(g channel.GroupMentions) bool { return len(g.Mentions) == 0 },
	Merge: func(env *kind.Env, a, b channel.GroupMentions) channel.GroupMentions {
		ch := a.Channel
		if ch == "" {
			ch = b.Channel
		}
		return channel.GroupMentions{Channel: ch, Mentions: channel.MergeGroupMentions(a.Mentions, b.Mentions, env.MentionCapOrDefault())}
	},
	Same: func(a, b channel.GroupMentions) bool { return slices.Equal(a.Mentions, b.Mentions) },
	Rows: func(g channel.GroupMentions) int { return len(g.Mentions) },
	FromEvent: func(d *event.Decoded) (channel.GroupMentions, bool) {
		if d.GroupMentions == nil || len(d.GroupMentions.Mentions) == 0 {
			return channel.GroupMentions{}, false
		}
		return *d.GroupMentions, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []channel.GroupMentions) (int64, error) {
		return storeOf(env).WritePG(ctx, vals)
	},
	PGTrim: func(ctx context.Context, env *kind.Env, vals []channel.GroupMentions) (int64, error) {
		chs := make([]string, len(vals))
		for i, g := range vals {
			chs[i] = g.Channel
		}
		return storeOf(env).TrimPG(ctx, chs)
	},
	PGGet: func(ctx context.Context, env *kind.Env, chs []string) ([]channel.GroupMentions, error) {
		return storeOf(env).ReadPG(ctx, chs)
	},
	PGPage: func(ctx context.Context, env *kind.Env, after string, _ bool, n int) ([]channel.GroupMentions, error) {
		return storeOf(env).PagePG(ctx, after, n)
	},
	PGRedact:   redactSQL,
	PGRedacted: []string{"channel_group_mentions.sender_id"},

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []channel.GroupMentions) ([]error, error) {
		return nil, storeOf(env).AddRedis(ctx, vals)
	},
	RedisGet: func(ctx context.Context, env *kind.Env, chs []string) ([][]*channel.GroupMentions, error) {
		got, err := storeOf(env).ReadRedis(ctx, chs)
		if err != nil {
			return nil, err
		}
		out := make([][]*channel.GroupMentions, len(chs))
		for i := range chs {
			out[i] = []*channel.GroupMentions{got[i]}
		}
		return out, nil
	},
	RedisScan: func(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[channel.GroupMentions], error) {
		s := storeOf(env)
		chs, next, err := s.ScanRedisChannels(ctx, cur, count)
		if err != nil {
			return kind.ScanPage[channel.GroupMentions]{}, err
		}
		page := kind.ScanPage[channel.GroupMentions]{Next: next}
		valid := kind.ValidIDs("channel_id", chs, &page.Scanned, &page.Invalid)
		got, err := s.ReadRedis(ctx, valid)
		if err != nil {
			return page, err
		}
		for _, g := range got {
			if g != nil && len(g.Mentions) > 0 {
				page.Values = append(page.Values, *g)
			}
		}
		return page, nil
	},
	RedisRedact: func(ctx context.Context, env *kind.Env, user, ch string) error {
		return storeOf(env).RedactRedis(ctx, user, ch)
	},
	Scripts: Scripts,
}

// Kind is Spec with its types erased, as the registry (pkg/kinds) lists it.
var Kind = kind.New(Spec)

// storeOf is the kind's storage on env, with env's retention.
func storeOf(env *kind.Env) Store {
	return NewStore(env.Postgres, env.Redis).WithMentionCap(env.MentionCapOrDefault())
}
