package threadcalls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/thread"
)

// A deletion set Redis does not know (a channel new to it, a Redis that
// lost it) is copied from Postgres. A read copies the small ones itself,
// within a budget of seqs per call; a larger set (up to
// channel.DeletionWindow seqs, 8 MB) is copied in the background, in
// pages, one copy per set at a time, and the reads answer from Postgres'
// counts meanwhile (deletions.Store.CountPG: the counts and the run after
// the read, never the set). So no read carries more than the budget.

// hydrateInlineSeqs is the budget of deleted seqs one read copies into
// Redis itself (about 160 KB).
const hydrateInlineSeqs = 20_000

// hydratePageSeqs is one background page.
const hydratePageSeqs = 5_000

// hydrateSetTimeout bounds one background copy.
const hydrateSetTimeout = 2 * time.Minute

// ErrSetsHydrating says a read needs sets that are being copied in the
// background: answer from Postgres.
var ErrSetsHydrating = errors.New("deletion sets are being copied into Redis")

// HydrateSets copies into Redis the listed sets that fit the budget (a
// set without deletions is marked known too) and starts a background copy
// of the others, which it returns. The caller has settled the sets'
// channels.
func (g *registers) HydrateSets(ctx context.Context, refs []thread.Ref) (deferred []thread.Ref, err error) {
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	sizes, err := g.DeletionStore().SizesPG(pctx, refs, hydrateInlineSeqs+1)
	if err != nil {
		return nil, fmt.Errorf("sizing the deletions of %d sets: %w", len(refs), err)
	}
	var inline []thread.Ref
	budget := int64(hydrateInlineSeqs)
	for i, ref := range refs {
		if sizes[i] <= budget {
			budget -= sizes[i]
			inline = append(inline, ref)
			continue
		}
		deferred = append(deferred, ref)
	}
	if len(inline) > 0 {
		ds, err := g.DeletionStore().ReadPG(pctx, inline)
		if err != nil {
			return nil, fmt.Errorf("reading the deletions of %d sets: %w", len(inline), err)
		}
		if err := g.DeletionStore().HydrateRedis(ctx, inline, ds); err != nil {
			g.M.RedisDegraded.WithLabelValues(seam.RedisOpHydrate).Inc()
			g.WarnRedis(ctx, seam.RedisOpHydrate+" deletions", err)
		}
	}
	for _, ref := range deferred {
		g.hydrateSetLater(ctx, ref)
	}
	return deferred, nil
}

// hydrateSetLater copies one set into Redis in the background, in pages;
// a copy of the set already running is left to finish.
func (g *registers) hydrateSetLater(ctx context.Context, ref thread.Ref) {
	go func() {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hydrateSetTimeout)
		defer cancel()
		_, _, _ = g.hydratingSets.Do(ref.String(), func() (any, error) {
			err := g.hydrateSetPages(hctx, ref)
			if err != nil {
				g.M.RedisDegraded.WithLabelValues(seam.RedisOpHydrate).Inc()
				g.Log.Warn("copying a deletion set into redis", zap.Stringer("set", ref), zap.Error(err))
			}
			return nil, err
		})
	}()
}

func (g *registers) hydrateSetPages(ctx context.Context, ref thread.Ref) error {
	var after int64
	for {
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		// One seq more than a page: the page that holds the set's end is
		// known to be its last, and marks it.
		seqs, err := g.DeletionStore().SeqsAfterPG(pctx, ref, after, hydratePageSeqs+1)
		cancel()
		if err != nil {
			return err
		}
		last := len(seqs) <= hydratePageSeqs
		seqs = seqs[:min(len(seqs), hydratePageSeqs)]
		err = g.DeletionStore().HydrateRedisPage(ctx, ref, seqs, last)
		if err != nil || last {
			return err
		}
		after = seqs[len(seqs)-1]
	}
}

// SetsHydrating reports whether err says the read needs sets still being
// copied (the caller answers from Postgres).
func SetsHydrating(err error) bool { return errors.Is(err, ErrSetsHydrating) }
