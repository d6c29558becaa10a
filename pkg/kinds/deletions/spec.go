package deletions

import (
	"context"
	"slices"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// Spec is a channel's deleted message seqs, or a thread's deleted
// reply seqs (keyed by the thread's root; root 0 is the channel): a set
// union kept within channel.DeletionWindow (channel.MergeDeletions), one
// channel_deletions row per seq and a member of the set's Redis sorted
// set. It belongs to no user, like a head, and carries no time; its
// events are keyed by the channel, whose events they share.
var Spec = &kind.Spec[thread.Ref, channel.Deletions]{
	Name:      "channel_deletions",
	Key:       func(d channel.Deletions) thread.Ref { return thread.Ref{Channel: d.Channel, Root: d.Root} },
	Compare:   func(a, b channel.Deletions) int { return refOf(a).Compare(refOf(b)) },
	RecordKey: func(r thread.Ref) string { return receipt.EscapeKeyID(r.Channel) },
	Time:      func(channel.Deletions) int64 { return 0 },
	Zero:      func(r thread.Ref) channel.Deletions { return channel.Deletions{Channel: r.Channel, Root: r.Root} },
	Empty:     func(d channel.Deletions) bool { return len(d.Seqs) == 0 },
	Merge: func(_ *kind.Env, a, b channel.Deletions) channel.Deletions {
		ref := refOf(a)
		if ref.Channel == "" {
			ref = refOf(b)
		}
		return channel.Deletions{Channel: ref.Channel, Root: ref.Root, Seqs: channel.MergeDeletions(a.Seqs, b.Seqs),
			UpdatedAtUnixMs: max(a.UpdatedAtUnixMs, b.UpdatedAtUnixMs)}
	},
	Same: func(a, b channel.Deletions) bool { return slices.Equal(a.Seqs, b.Seqs) },
	Rows: func(d channel.Deletions) int { return len(d.Seqs) },
	// A window's deletions of a channel gather unsorted and are sorted
	// once: a channel deleting thousands of seqs in one window costs a
	// sort of them, not a copy of the growing set per record.
	Gather: func(acc, d channel.Deletions) channel.Deletions {
		if acc.Channel == "" {
			acc.Channel, acc.Root = d.Channel, d.Root
		}
		acc.Seqs = append(acc.Seqs, d.Seqs...)
		acc.UpdatedAtUnixMs = max(acc.UpdatedAtUnixMs, d.UpdatedAtUnixMs)
		return acc
	},
	Settle: func(_ *kind.Env, acc channel.Deletions) channel.Deletions {
		acc.Seqs = channel.SettleDeletions(acc.Seqs)
		return acc
	},
	FromEvent: func(d *event.Decoded) (channel.Deletions, bool) {
		if d.Deletions == nil {
			return channel.Deletions{}, false
		}
		return *d.Deletions, true
	},

	PGWrite: func(ctx context.Context, env *kind.Env, vals []channel.Deletions) (int64, error) {
		return storeOf(env).WritePG(ctx, vals)
	},
	PGTrim: func(ctx context.Context, env *kind.Env, vals []channel.Deletions) (int64, error) {
		refs := make([]thread.Ref, len(vals))
		for i, d := range vals {
			refs[i] = refOf(d)
		}
		return storeOf(env).TrimPG(ctx, refs)
	},
	PGGet: func(ctx context.Context, env *kind.Env, refs []thread.Ref) ([]channel.Deletions, error) {
		return storeOf(env).ReadPG(ctx, refs)
	},
	PGPage: func(ctx context.Context, env *kind.Env, after thread.Ref, _ bool, n int) ([]channel.Deletions, error) {
		return storeOf(env).PagePG(ctx, after, n)
	},

	RedisWrite: func(ctx context.Context, env *kind.Env, vals []channel.Deletions) ([]error, error) {
		return storeOf(env).AddRedis(ctx, vals)
	},
	RedisGet: func(ctx context.Context, env *kind.Env, refs []thread.Ref) ([][]*channel.Deletions, error) {
		got, err := storeOf(env).ReadRedis(ctx, refs)
		if err != nil {
			return nil, err
		}
		out := make([][]*channel.Deletions, len(refs))
		for i, r := range refs {
			out[i] = []*channel.Deletions{nil}
			if got[i] != nil {
				out[i][0] = &channel.Deletions{Channel: r.Channel, Root: r.Root, Seqs: got[i]}
			}
		}
		return out, nil
	},
	RedisScan: func(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) (kind.ScanPage[channel.Deletions], error) {
		refs, page, err := scanRefs(ctx, env, cur, count)
		out := kind.ScanPage[channel.Deletions]{Next: page.Next, Scanned: page.Scanned, Invalid: page.Invalid}
		if err != nil {
			return out, err
		}
		got, err := storeOf(env).ReadRedis(ctx, refs)
		if err != nil {
			return out, err
		}
		for i, r := range refs {
			if len(got[i]) > 0 {
				out.Values = append(out.Values, channel.Deletions{Channel: r.Channel, Root: r.Root, Seqs: got[i]})
			}
		}
		return out, nil
	},

	// A set is up to channel.DeletionWindow seqs: the sweep compares
	// digests and reads whole only the sets whose digests differ.
	Digests: &kind.Digests[thread.Ref]{
		PGPage: func(ctx context.Context, env *kind.Env, after thread.Ref, _ bool, n int) ([]thread.Ref, []kind.Digest, error) {
			return storeOf(env).DigestsPagePG(ctx, after, n)
		},
		PG: func(ctx context.Context, env *kind.Env, refs []thread.Ref) ([]kind.Digest, error) {
			return storeOf(env).DigestsPG(ctx, refs)
		},
		Redis: func(ctx context.Context, env *kind.Env, refs []thread.Ref) ([]kind.Digest, error) {
			return storeOf(env).DigestsRedis(ctx, refs)
		},
		RedisScan: scanRefs,
	},
	Scripts: Scripts,
}

// Kind is Spec with its types erased, as the registry (pkg/kinds) lists it.
var Kind = kind.New(Spec)

func storeOf(env *kind.Env) Store { return NewStore(env.Postgres, env.Redis) }

// scanRefs is one SCAN page of the deletion sets Redis holds, by
// name, in order, those with an invalid channel id counted apart.
func scanRefs(ctx context.Context, env *kind.Env, cur redisstore.ScanCursor, count int64) ([]thread.Ref, kind.ScanPage[struct{}], error) {
	refs, next, err := storeOf(env).ScanRedisSets(ctx, cur, count)
	if err != nil {
		return nil, kind.ScanPage[struct{}]{}, err
	}
	slices.SortFunc(refs, thread.Ref.Compare)
	refs = slices.Compact(refs)
	page := kind.ScanPage[struct{}]{Next: next, Scanned: len(refs)}
	valid := refs[:0]
	for _, r := range refs {
		if receipt.ValidateID("channel_id", r.Channel) != nil {
			page.Invalid++
			continue
		}
		valid = append(valid, r)
	}
	return valid, page, nil
}

// refOf names the set d belongs to.
func refOf(d channel.Deletions) thread.Ref { return thread.Ref{Channel: d.Channel, Root: d.Root} }
