package kinds

import (
	"context"
	"slices"
	"strings"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// deletionSpec is a channel's deleted message seqs: a set union kept
// within channel.DeletionWindow (channel.MergeDeletions), one
// channel_deletions row per seq and a member of the channel's Redis
// sorted set. It belongs to no user, like a head, and carries no time.
var deletionSpec = &Spec[string, channel.Deletions]{
	Name:      "channel_deletions",
	Key:       func(d channel.Deletions) string { return d.Channel },
	Compare:   func(a, b channel.Deletions) int { return strings.Compare(a.Channel, b.Channel) },
	RecordKey: receipt.EscapeKeyID,
	Time:      func(channel.Deletions) int64 { return 0 },
	Zero:      func(ch string) channel.Deletions { return channel.Deletions{Channel: ch} },
	Empty:     func(d channel.Deletions) bool { return len(d.Seqs) == 0 },
	Merge: func(_ *Env, a, b channel.Deletions) channel.Deletions {
		ch := a.Channel
		if ch == "" {
			ch = b.Channel
		}
		return channel.Deletions{Channel: ch, Seqs: channel.MergeDeletions(a.Seqs, b.Seqs),
			UpdatedAtUnixMs: max(a.UpdatedAtUnixMs, b.UpdatedAtUnixMs)}
	},
	Same: func(a, b channel.Deletions) bool { return slices.Equal(a.Seqs, b.Seqs) },
	Rows: func(d channel.Deletions) int { return len(d.Seqs) },
	FromEvent: func(d *event.Decoded) (channel.Deletions, bool) {
		if d.Deletions == nil {
			return channel.Deletions{}, false
		}
		return *d.Deletions, true
	},

	PGWrite: func(ctx context.Context, env *Env, vals []channel.Deletions) (int64, error) {
		return env.Postgres.InsertDeletions(ctx, vals)
	},
	PGTrim: func(ctx context.Context, env *Env, vals []channel.Deletions) (int64, error) {
		chs := make([]string, len(vals))
		for i, d := range vals {
			chs[i] = d.Channel
		}
		return env.Postgres.TrimDeletions(ctx, chs)
	},
	PGGet: func(ctx context.Context, env *Env, chs []string) ([]channel.Deletions, error) {
		return env.Postgres.Deletions(ctx, chs)
	},
	PGPage: func(ctx context.Context, env *Env, after string, _ bool, n int) ([]channel.Deletions, error) {
		return env.Postgres.DeletionsPage(ctx, after, n)
	},

	RedisWrite: func(ctx context.Context, env *Env, vals []channel.Deletions) ([]error, error) {
		return env.Redis.AddDeletions(ctx, vals)
	},
	RedisGet: func(ctx context.Context, env *Env, chs []string) ([][]*channel.Deletions, error) {
		got, err := env.Redis.Deletions(ctx, chs)
		if err != nil {
			return nil, err
		}
		out := make([][]*channel.Deletions, len(chs))
		for i, ch := range chs {
			out[i] = []*channel.Deletions{nil}
			if got[i] != nil {
				out[i][0] = &channel.Deletions{Channel: ch, Seqs: got[i]}
			}
		}
		return out, nil
	},
	RedisScan: func(ctx context.Context, env *Env, cur redisstore.ScanCursor, count int64) (ScanPage[channel.Deletions], error) {
		chs, next, err := env.Redis.ScanDeletionChannels(ctx, cur, count)
		if err != nil {
			return ScanPage[channel.Deletions]{}, err
		}
		page := ScanPage[channel.Deletions]{Next: next}
		valid := validIDs("channel_id", chs, &page.Scanned, &page.Invalid)
		got, err := env.Redis.Deletions(ctx, valid)
		if err != nil {
			return page, err
		}
		for i, ch := range valid {
			if len(got[i]) > 0 {
				page.Values = append(page.Values, channel.Deletions{Channel: ch, Seqs: got[i]})
			}
		}
		return page, nil
	},
}
