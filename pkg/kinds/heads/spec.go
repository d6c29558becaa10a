package heads

import (
	"context"
	"strings"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// spec is a channel's head: a max-register of the greatest message seq
// notified (channel.MergeHead), one channel_heads row and a field of the
// channel value in Redis. It belongs to no user.
var spec = &kind.Spec[string, channel.Head]{
	Name:      "channel_heads",
	Key:       func(h channel.Head) string { return h.Channel },
	Compare:   func(a, b channel.Head) int { return strings.Compare(a.Channel, b.Channel) },
	RecordKey: receipt.EscapeKeyID,
	Time:      func(h channel.Head) int64 { return h.UpdatedAtUnixMs },
	Zero:      func(ch string) channel.Head { return channel.Head{Channel: ch} },
	Empty:     func(h channel.Head) bool { return h.Seq == 0 },
	Merge:     func(_ *kind.Env, a, b channel.Head) channel.Head { m, _ := channel.MergeHead(a, b); return m },
	Same:      func(a, b channel.Head) bool { return a.Seq == b.Seq },
	FromEvent: func(d *event.Decoded) (channel.Head, bool) {
		if d.Channel == nil {
			return channel.Head{}, false
		}
		return *d.Channel, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []channel.Head) (int64, error) {
		return NewStore(env.Postgres, env.Redis).WritePG(ctx, vals)
	},
	PGGet: func(ctx context.Context, env *kind.Env, chs []string) ([]channel.Head, error) {
		return NewStore(env.Postgres, env.Redis).ReadPG(ctx, chs)
	},
	PGPage: func(ctx context.Context, env *kind.Env, after string, _ bool, n int) ([]channel.Head, error) {
		return NewStore(env.Postgres, env.Redis).PagePG(ctx, after, n)
	},

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []channel.Head) ([]error, error) {
		res, err := NewStore(env.Postgres, env.Redis).RaiseRedis(ctx, vals)
		return kind.ResultErrs(res, err, func(r Result) error { return r.Err })
	},
	RedisGet: func(ctx context.Context, env *kind.Env, chs []string) ([][]*channel.Head, error) {
		got, err := NewStore(env.Postgres, env.Redis).ReadRedis(ctx, chs)
		if err != nil {
			return nil, err
		}
		out := make([][]*channel.Head, len(chs))
		for i, ch := range chs {
			out[i] = []*channel.Head{nil}
			if h, ok := got[ch]; ok {
				out[i][0] = &h
			}
		}
		return out, nil
	},
	RedisScan: func(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[channel.Head], error) {
		chs, next, err := NewStore(env.Postgres, env.Redis).ScanRedis(ctx, cur, count)
		if err != nil {
			return kind.ScanPage[channel.Head]{}, err
		}
		page := kind.ScanPage[channel.Head]{Next: next}
		valid := kind.ValidIDs("channel_id", chs, &page.Scanned, &page.Invalid)
		got, err := NewStore(env.Postgres, env.Redis).ReadRedis(ctx, valid)
		if err != nil {
			return page, err
		}
		for _, ch := range valid {
			if h, ok := got[ch]; ok {
				page.Values = append(page.Values, h)
			}
		}
		return page, nil
	},
	Scripts: Scripts,
}

// Kind is the heads' kind, listed by the registry pkg/kinds.
var Kind = kind.New(spec)
