package readbycalls

import (
	"context"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tracing"
	"github.com/readstate/receipts/pkg/views/readby"
)

// rebuildPage bounds one Postgres page of a view rebuild.
const rebuildPage = 1000

// rebuildTimeout bounds a whole view rebuild (each page also has the
// Postgres and Redis timeouts): it runs detached from the call that
// started it, since others may be waiting on it, and a large channel's
// rebuild is a page at a time of its members.
const rebuildTimeout = 30 * time.Second

// rebuildWait bounds how long a call waits for a view rebuild (its own
// or the one it joined), below the server's write timeout: past it the
// call is Unavailable (retry), and the rebuild goes on for the next.
const rebuildWait = 10 * time.Second

// MemberCount is a channel's joined-member count: Redis when its
// membership hash is complete, else Postgres.
func (g *ReadBy) MemberCount(ctx context.Context, ch string) (int64, error) {
	n, complete, err := g.MemberStore().MemberCount(ctx, ch)
	if err == nil && complete {
		return n, nil
	}
	if err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, err)
	}
	if err := g.Settled(ctx, nil, []string{ch}); err != nil {
		return 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	return g.MemberStore().CountPG(pctx, ch)
}

// Sight reads one channel for read-by and ticks. The view is rebuilt from
// Postgres (member cursors and settings, a max-merge that never undoes a
// newer move) when it is not marked loaded: after a FLUSHALL, for a new
// channel, and every ViewRefresh for a small channel (heals moves a
// degraded Redis missed); a large channel's mark lasts 60 times longer.
func (g *ReadBy) Sight(ctx context.Context, ch string) (*readby.Sight, error) {
	n, err := g.MemberCount(ctx, ch)
	if err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	s := &readby.Sight{Channel: ch, MemberCount: n, Detailed: n <= g.Cfg.ReadBy.Threshold()}
	// A large channel's answers are counts (its view's sorted sets): its
	// members' cursors are never read. A small one's view may hold a few
	// leftovers beyond its members; twice the threshold bounds them.
	most := 0
	if s.Detailed {
		most = 2 * int(g.Cfg.ReadBy.Threshold())
	}
	views, err := g.ViewStore().ReadUpTo(ctx, []string{ch}, most)
	if err != nil && ctx.Err() != nil {
		return nil, g.DurableErr(ctx, ctx.Err()) // the caller left: no rebuild for nobody
	}
	if err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpView, 1, err)
		views = []readby.State{{Channel: ch}}
	}
	s.View = views[0]
	if s.Detailed && s.View.CursorsLeftOut {
		s.Detailed = false // more cursors than members: answer with counts
	}
	if !s.View.Loaded {
		if err := g.rebuildView(ctx, ch, s.Detailed, &s.View); err != nil {
			return nil, g.DurableErr(ctx, err)
		}
	}
	if s.Head, err = g.ChannelHead(ctx, ch); err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	if !s.Detailed {
		return s, nil
	}
	regs, err := g.MembersOf(ctx, ch)
	if err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	for _, r := range regs {
		if r.Member {
			s.Members = append(s.Members, r.Key.User)
		}
	}
	slices.Sort(s.Members)
	if len(s.Members) > 0 {
		s.Settings, err = g.SettingsOf(ctx, s.Members)
		if err != nil {
			return nil, g.DurableErr(ctx, err)
		}
	}
	return s, nil
}

// ChannelHead is a channel's head (nil before its first notice): Redis,
// else Postgres, hydrating Redis (a max-merge), so that ticks keep their
// head after Redis lost it (a FLUSHALL, an eviction).
func (g *ReadBy) ChannelHead(ctx context.Context, ch string) (*channel.Head, error) {
	heads, rerr := g.HeadStore().ReadRedis(ctx, []string{ch})
	if rerr == nil {
		if h, ok := heads[ch]; ok {
			if h.Seq == 0 { // known to have none
				return nil, nil
			}
			return &h, nil
		}
	} else {
		g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, rerr)
	}
	if err := g.Settled(ctx, nil, []string{ch}); err != nil {
		return nil, fmt.Errorf("reading the head of %s: %w", ch, err)
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	durable, err := g.HeadStore().ReadPG(pctx, []string{ch})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("reading the head of %s: %w", ch, err)
	}
	var head *channel.Head
	var none []string
	if len(durable) > 0 && durable[0].Seq > 0 {
		head = &durable[0]
	} else {
		none = []string{ch}
	}
	if rerr == nil {
		if err := g.HeadStore().HydrateRedis(ctx, durable, none); err != nil {
			g.M.RedisDegraded.WithLabelValues(seam.RedisOpHydrate).Inc()
			g.WarnRedis(ctx, seam.RedisOpHydrate+" heads", err)
		}
	}
	return head, nil
}

// MembersOf returns a small channel's registers: Redis when its hash is
// complete, else Postgres (hydrating Redis).
func (g *ReadBy) MembersOf(ctx context.Context, ch string) ([]channel.Membership, error) {
	regs, complete, err := g.MemberStore().ChannelMembers(ctx, ch, nil)
	if err == nil && complete {
		return regs, nil
	}
	regs, _, err = g.DurableMembers(ctx, ch)
	return regs, err
}

// rebuildView merges the members' durable cursors (of the kinds they
// share; none that may predate the user's erasure as Redis holds it) into
// the channel's view and marks it loaded, then, for a small channel,
// merges them into v, the view as read before. One rebuild of a channel
// runs at a time on a replica (concurrent callers share it, each waiting
// at most until its own context ends), bounded by rebuildTimeout. A large
// channel's rebuild goes a page of members at a time into Redis, never
// holding more than one page.
func (g *ReadBy) rebuildView(ctx context.Context, ch string, small bool, v *readby.State) error {
	if err := ctx.Err(); err != nil {
		return err // the caller left: start no rebuild for nobody
	}
	key := "l:" + ch
	if small {
		key = "s:" + ch
	}
	wait := g.rebuilds.DoChan(key, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rebuildTimeout)
		defer cancel()
		return g.rebuildPages(rctx, ch, small)
	})
	var res singleflight.Result
	timer := time.NewTimer(rebuildWait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("rebuilding the view of %s: still running after %s", ch, rebuildWait)
	case res = <-wait:
	}
	if res.Err != nil {
		return res.Err
	}
	moves, _ := res.Val.([]readby.Move)
	if !small {
		return nil
	}
	readby.MergeMoves(v, moves)
	return nil
}

// rebuildPages reads the members' durable cursors a page at a time and
// merges each page into the view (the last marks it loaded). It returns
// the moves of a small channel; a large channel's are dropped page by
// page.
func (g *ReadBy) rebuildPages(ctx context.Context, ch string, small bool) ([]readby.Move, error) {
	if g.RebuildHook != nil {
		g.RebuildHook()
	}
	ttl := g.Cfg.ReadBy.Refresh()
	if !small {
		ttl *= 60
	}
	// The members' cursors are in many users' keys: settled as the
	// channel's (in a cluster, a user's slot may have lost data apart;
	// the user's restore, when the user next writes or reads, covers it).
	if err := g.Settled(ctx, nil, []string{ch}); err != nil {
		return nil, fmt.Errorf("rebuilding the view of %s: %w", ch, err)
	}
	var kept []readby.Move
	after := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		page, err := g.ViewStore().MemberCursors(pctx, ch, after, rebuildPage)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("rebuilding the view of %s: %w", ch, err)
		}
		// An erased user's rows the persister has not deleted yet must
		// not come back into the view (nor the answer).
		users := make([]string, len(page))
		for i, c := range page {
			users[i] = c.User
		}
		tombs, err := g.Redis.Tombstones(ctx, users)
		if err != nil {
			return nil, fmt.Errorf("rebuilding the view of %s: reading tombstones: %w", ch, err)
		}
		moves := readby.RebuildMoves(ch, page, tombs)
		last := len(page) < rebuildPage
		var loaded []string
		if last {
			loaded = []string{ch}
		}
		err = g.ViewStore().Rebuild(ctx, loaded, moves, ttl)
		if err != nil {
			// Not marked loaded: the next read rebuilds again.
			g.RedisDegradedOn(ctx, seam.RedisOpView, 1, err)
			if !small {
				return nil, nil // counts from what the view holds
			}
		}
		if small {
			kept = append(kept, moves...)
		}
		if last {
			return kept, nil
		}
		after = page[len(page)-1].User
	}
}

// GetMessageReceipts implements receiptsv1connect.ReceiptServiceHandler.
func (g *ReadBy) GetMessageReceipts(ctx context.Context, req *connect.Request[receiptsv1.GetMessageReceiptsRequest]) (*connect.Response[receiptsv1.MessageReceipts], error) {
	m := req.Msg
	if err := seam.ValidateChannelSeq("", m.GetChannelId(), m.GetSeq(), m.GetSenderId()); err != nil {
		return nil, err
	}
	out, err := g.messageReceipts(ctx, m.GetChannelId(), m.GetSeq(), m.GetSenderId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (g *ReadBy) messageReceipts(ctx context.Context, ch string, seq int64, sender string) (*receiptsv1.MessageReceipts, error) {
	s, err := g.Sight(ctx, ch)
	if err != nil {
		return nil, err
	}
	return g.ReceiptsOf(ctx, s, seq, sender)
}

// ReceiptsOf answers one message from a channel's sight: member lists for
// a small channel ("at" from the cursor-move log, else the view's time of
// the member's current cursor), counts for a large one.
func (g *ReadBy) ReceiptsOf(ctx context.Context, s *readby.Sight, seq int64, sender string) (*receiptsv1.MessageReceipts, error) {
	if !s.Detailed {
		c, err := g.ViewStore().Count(ctx, s.Channel, seq, sender)
		if err != nil {
			return nil, g.DurableErr(ctx, err)
		}
		return s.CountedReceipts(seq, sender, c), nil
	}
	out, reached := s.Receipts(seq, sender)
	if len(reached) > 0 {
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		read, delivered, err := g.ViewStore().FirstReached(pctx, s.Channel, seq, reached)
		cancel()
		if err != nil {
			// The view's times stand in: when each cursor reached where it is.
			tracing.Logger(ctx, g.Log).Warn("read-by: reading the cursor-move log; answering with the view's times", zap.Error(err))
		}
		readby.WithFirstReached(out, read, delivered)
	}
	return out, nil
}

// GetTicks implements receiptsv1connect.ReceiptServiceHandler.
func (g *ReadBy) GetTicks(ctx context.Context, req *connect.Request[receiptsv1.GetTicksRequest]) (*connect.Response[receiptsv1.ChannelTicks], error) {
	ch := req.Msg.GetChannelId()
	if err := receipt.ValidateID("channel_id", ch); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	s, err := g.Sight(ctx, ch)
	if err != nil {
		return nil, err
	}
	out, err := g.TicksOf(ctx, s)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// TicksOf computes a channel's watermarks (readby.Sight.Ticks), a large
// channel's from its view's sorted sets.
func (g *ReadBy) TicksOf(ctx context.Context, s *readby.Sight) (*receiptsv1.ChannelTicks, error) {
	if s.Detailed {
		return s.Ticks(), nil
	}
	c, err := g.ViewStore().Count(ctx, s.Channel, 0, "")
	if err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	return s.CountedTicks(c), nil
}
