package threadcalls

import (
	"context"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/tracing"
)

// countThreads sets each thread's counts: its register at its head less
// its deleted replies (thread.State.CountsDeleted). Only threads with
// unread replies ask: one Redis pipeline, then Postgres for the sets
// Redis does not know (hydrated) or for all of them when Redis fails.
func (g *Threads) countThreads(ctx context.Context, ts []FollowedThread) error {
	var qs []deletions.Query
	var idx []int
	for i := range ts {
		t := &ts[i]
		t.Counts = t.State.CountsAt(t.Head.Seq, g.Cfg.MentionCap)
		if t.Counts.Unread == 0 {
			continue
		}
		read := t.State.Cursors.EffectiveRead().Seq
		q := deletions.Query{Ref: t.State.Key.Ref, Read: read, Head: t.Head.Seq}
		for _, m := range t.State.Mentions {
			if m > read {
				q.Mentions = append(q.Mentions, m)
			}
		}
		qs, idx = append(qs, q), append(idx, i)
	}
	if len(qs) == 0 {
		return nil
	}
	got, err := g.DeletionStore().CountRedis(ctx, qs)
	if err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, err)
		return g.countThreadsDurable(ctx, ts, qs, idx)
	}
	var missing []deletions.Query
	var missingIdx []int
	for j, c := range got {
		if !c.Known {
			missing, missingIdx = append(missing, qs[j]), append(missingIdx, idx[j])
			continue
		}
		applyThreadDeletions(&ts[idx[j]].Counts, c.Deleted, c.FirstKept, len(c.DeletedMentions), g.Cfg.MentionCap)
	}
	if len(missing) == 0 {
		return nil
	}
	return g.hydrateThreadDeletions(ctx, ts, missing, missingIdx)
}

// hydrateThreadDeletions counts the threads whose deletions Redis does
// not know from Postgres' counts, and copies those sets into Redis
// (hydrateSets: the small ones now, the large in the background).
func (g *Threads) hydrateThreadDeletions(ctx context.Context, ts []FollowedThread, qs []deletions.Query, idx []int) error {
	if err := g.countThreadsDurable(ctx, ts, qs, idx); err != nil {
		return err
	}
	refs := make([]thread.Ref, len(qs))
	for j, q := range qs {
		refs[j] = q.Ref
	}
	if _, err := g.HydrateSets(ctx, refs); err != nil {
		tracing.Logger(ctx, g.Log).Warn("reading thread deletions to hydrate", zap.Error(err))
	}
	return nil
}

// countThreadsDurable counts the queried threads' deletions from Postgres
// alone (Redis failed), as the real-time read counts them.
func (g *Threads) countThreadsDurable(ctx context.Context, ts []FollowedThread, qs []deletions.Query, idx []int) error {
	refs := make([]thread.Ref, len(qs))
	for j, q := range qs {
		refs[j] = q.Ref
	}
	if err := g.Settled(ctx, nil, refChannels(refs)); err != nil {
		return g.DurableErr(ctx, err)
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	dc, err := g.DeletionStore().CountPG(pctx, qs)
	cancel()
	if err != nil {
		return g.DurableErr(ctx, err)
	}
	for j, c := range dc {
		applyThreadDeletions(&ts[idx[j]].Counts, c.Deleted, c.FirstKept, len(c.DeletedMentions), g.Cfg.MentionCap)
	}
	return nil
}

// applyThreadDeletions takes a thread's deleted replies in (read, head]
// and its deleted mentions above the read out of its counts.
func applyThreadDeletions(c *thread.Counts, deleted, firstKept int64, deletedMentions, mentionCap int) {
	c.Unread, c.FirstUnread = channel.AfterDeletions(c.Unread, firstKept, deleted)
	if c.Unread == 0 {
		c.Mentions, c.MentionsCapped = 0, false
		return
	}
	c.Mentions = max(0, c.Mentions-int64(deletedMentions))
	c.MentionsCapped = c.Mentions > int64(mentionCap)
}

// threadCountsOf is one thread's counts for a write's answer, its deleted
// replies taken out; a failed deletion read answers the counts without
// them (the write itself succeeded).
func (g *Threads) threadCountsOf(ctx context.Context, st thread.State, head thread.Head) thread.Counts {
	ts := []FollowedThread{{State: &st, Head: head}}
	if err := g.countThreads(ctx, ts); err != nil {
		tracing.Logger(ctx, g.Log).Warn("counting a thread's deleted replies", zap.Error(err))
	}
	return ts[0].Counts
}

// refChannels lists the channels of refs, once each.
func refChannels(refs []thread.Ref) []string {
	seen := make(map[string]bool, len(refs))
	var out []string
	for _, r := range refs {
		if !seen[r.Channel] {
			seen[r.Channel] = true
			out = append(out, r.Channel)
		}
	}
	return out
}
