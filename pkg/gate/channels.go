package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/markcalls"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/gate/threadcalls"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/tracing"
	"github.com/readstate/receipts/pkg/views/unread"
)

// validateChannelList checks a user id and a bounded list of channel ids,
// and returns the distinct channels in request order.
func validateChannelList(user string, channels []string, maxChannels int) ([]string, error) {
	if err := receipt.ValidateID("user_id", user); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	if len(channels) > maxChannels {
		return nil, seam.TooMany("channel_id", fmt.Sprintf("has %d ids", len(channels)), maxChannels)
	}
	for i, c := range channels {
		if err := receipt.ValidateID("channel_id["+strconv.Itoa(i)+"]", c); err != nil {
			return nil, seam.Invalid(apierr.InvalidID, err)
		}
	}
	return batch.Dedupe(channels, func(id string) string { return id }, func(kept, _ string) string { return kept }), nil
}

// GetUnread implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) GetUnread(ctx context.Context, req *connect.Request[receiptsv1.GetUnreadRequest]) (*connect.Response[receiptsv1.GetUnreadResponse], error) {
	user := req.Msg.GetUserId()
	channels, err := validateChannelList(user, req.Msg.GetChannelId(), g.Cfg.MaxUnreadChannels)
	if err != nil {
		return nil, err
	}
	page, err := seam.ChannelPage(req.Msg.GetPageSize(), req.Msg.GetPageToken(), len(channels) > 0)
	if err != nil {
		return nil, err
	}
	var seen unreadSeen
	views, more, err := g.unreadPage(ctx, user, channels, page, &seen)
	if err != nil {
		return nil, err
	}
	// The followed threads: read only when the unread read did not show
	// the user has none (the common case costs no round trip).
	var threads map[string]threadcalls.ThreadCounts
	if !seen.threadsNone {
		if threads, err = g.ThreadCountsOrNone(ctx, user); err != nil {
			return nil, err
		}
	}
	lv, err := g.levelsOf(ctx, user, viewChannels(views), seen.levels)
	if err != nil {
		return nil, err
	}
	out := &receiptsv1.GetUnreadResponse{UserId: user, Channels: make([]*receiptsv1.ChannelUnread, len(views))}
	if more {
		out.NextPageToken = seam.NextPageToken(views[len(views)-1].Channel)
	}
	// The messages of all channels in two allocations, not four per
	// channel (40,000 for a page of 10,000).
	cus := make([]receiptsv1.ChannelUnread, len(views))
	pos := make([]receiptsv1.Position, 3*len(views))
	for i, v := range views {
		head, read, public := &pos[3*i], &pos[3*i+1], &pos[3*i+2]
		head.Seq = v.Head.Seq
		r, p := v.State.EffectiveRead(), v.State.Read.Position
		read.Epoch, read.Seq = r.Epoch, r.Seq
		public.Epoch, public.Seq = p.Epoch, p.Seq
		cu := &cus[i]
		cu.ChannelId = v.Channel
		cu.Head, cu.Read, cu.PublicRead = head, read, public
		level, muted, _, _ := lv.of(v.Channel)
		c := v.At(level, muted)
		cu.UnreadCount = c.Unread
		cu.MentionCount = v.Shown(c.Mentions)
		cu.MentionsCapped = c.MentionsCapped
		cu.FirstUnreadSeq = c.FirstUnread
		cu.Member = v.HasMembership && v.Membership.Member
		if tc, ok := threads[v.Channel]; ok {
			cu.UnreadThreads, cu.ThreadMentionCount = tc.UnreadThreads, tc.Mentions
			out.UnreadThreadsTotal += tc.UnreadThreads
		}
		cu.Level, cu.Muted, cu.MutedUntilUnixMs = level.String(), muted, lv.byChannel[v.Channel].MutedUntilUnixMs
		out.Channels[i] = cu
		if c.CountsUnread {
			out.UnreadTotal += cu.UnreadCount
			if cu.UnreadCount > 0 {
				out.ChannelsWithUnread++
			}
		}
		if c.CountsMentions {
			out.MentionTotal += cu.MentionCount
			out.MentionsCapped = out.MentionsCapped || cu.MentionsCapped
		}
	}
	return connect.NewResponse(out), nil
}

// viewChannels is the channels of views, in their order.
func viewChannels(views []unread.ChannelView) []string {
	out := make([]string, len(views))
	for i, v := range views {
		out[i] = v.Channel
	}
	return out
}

// unread is a user's counts in the listed channels (default: every
// channel the user is a member of or has a cursor in), in channel order.
//
// Redis answers alone when it holds everything the counts need: the
// user's hashes hydrated and every head known. Otherwise what it lacks is
// read from Postgres and merged into Redis (hydrates are merges: a newer
// write made meanwhile wins), and Redis is read again — at most three
// bounded reads. When Redis cannot answer, the counts come from Postgres
// alone (which may lag by the persister's delay).
func (g *Gate) unread(ctx context.Context, user string, channels []string) ([]unread.ChannelView, error) {
	views, _, err := g.unreadPage(ctx, user, channels, unread.Page{}, nil)
	return views, err
}

// unreadSeen is what the unread read saw in Redis besides the counts.
type unreadSeen struct {
	// threadsNone: the user has no thread register.
	threadsNone bool
	// levels: the user's settings and notification registers (nil: not
	// read; levelsOf reads them).
	levels *notifications.Levels
}

// unreadPage is unread of a page of the default set (page applies only
// when no channel is listed); more reports that the set goes on. seen,
// when not nil, receives what Redis showed besides the counts.
func (g *Gate) unreadPage(ctx context.Context, user string, channels []string, page unread.Page, seen *unreadSeen) (views []unread.ChannelView, more bool, err error) {
	durable := func() ([]unread.ChannelView, bool, error) {
		// Redis may be up, with nothing lost, and behind a degraded write.
		if err := g.Restore.CatchUpDegraded(ctx, user); err != nil {
			return nil, false, g.DurableErr(ctx, err)
		}
		if len(channels) > 0 {
			views, err := g.durableUnread(ctx, user, channels)
			return views, false, err
		}
		// The page of the default set, however many channels the user
		// has: its channels first, then their counts as if listed (no
		// page: every page, a badge's whole set).
		var all []unread.ChannelView
		after := page.After
		for {
			limit := page.Limit
			if limit == 0 {
				limit = seam.MaxChannelPageSize
			}
			pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
			chs, err := g.unreadStore().DefaultChannelsPG(pctx, user, after, limit+1)
			cancel()
			if err != nil {
				return nil, false, g.DurableErr(ctx, err)
			}
			more := len(chs) > limit
			chs = chs[:min(len(chs), limit)]
			if len(chs) > 0 {
				views, err := g.durableUnread(ctx, user, chs)
				if err != nil {
					return nil, false, err
				}
				all = append(all, views...)
			}
			if page.Limit > 0 || !more {
				return all, more && page.Limit > 0, nil
			}
			if len(all) >= seam.MaxRestoreChannels {
				return nil, false, seam.UnavailableError(fmt.Errorf("user %s has more than %d channels", user, seam.MaxRestoreChannels))
			}
			after = chs[len(chs)-1]
		}
	}
	if err := g.Restore.SettleDegraded(ctx, []string{user}); err != nil {
		// Redis is behind a write acknowledged without it.
		g.WarnRedis(ctx, seam.RedisOpGet, err)
		g.M.ReadFallbacks.WithLabelValues("redis_error").Inc()
		return durable()
	}
	for attempt := 0; ; attempt++ {
		var view unread.UnreadView
		levels := g.notificationStore().NewLevelsRead() // read with the heads
		probe := g.ThreadStore().Probe()
		if len(channels) == 0 {
			view, err = g.unreadStore().ReadPage(ctx, user, page, levels, probe)
		} else {
			view, err = g.unreadStore().Read(ctx, user, channels, levels, probe)
		}
		if errors.Is(err, redisstore.ErrTooManyChannels) {
			// The same cap as Postgres' (pgstore.MaxChannelsPerRead), which
			// answers the first of the user's channels in channel order.
			g.M.ReadFallbacks.WithLabelValues("too_many_channels").Inc()
			return durable()
		}
		if err != nil {
			g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, err)
			g.M.ReadFallbacks.WithLabelValues("redis_error").Inc()
			return durable()
		}
		complete := view.CursorsComplete && view.MembershipsComplete && len(view.MissingHeads) == 0
		if complete && (len(view.MissingDeletions) > 0 || len(view.MissingGroupMentions) > 0) {
			// Only a channel's deletions or group mentions are unknown (a
			// channel new to Redis): hydrate them and read again. Without
			// Postgres, answer without them rather than fail.
			if attempt == 2 {
				g.M.ReadFallbacks.WithLabelValues("incomplete").Inc()
				return durable()
			}
			if err := g.hydrateChannelSets(ctx, view); err == nil {
				continue
			} else if cerr := seam.ContextError(ctx, err); cerr != nil {
				return nil, false, cerr
			} else if threadcalls.SetsHydrating(err) {
				g.M.ReadFallbacks.WithLabelValues("hydrating").Inc()
				return durable()
			}
		}
		if complete {
			if err := g.ConfirmRead(ctx, user); err != nil {
				// The master's answer may not survive a failover.
				return nil, false, seam.UnavailableError(fmt.Errorf("reading unread counts: %w; retry", err), apierr.RetryAfter(g.Cfg.RetryAfter))
			}
			if seen != nil {
				*seen = unreadSeen{threadsNone: probe.None(), levels: levels.Levels()}
			}
			return view.Channels, view.More, nil // in channel order
		}
		if attempt == 2 {
			// Hydrating did not complete Redis (failing, or racing an
			// eviction): answer from Postgres rather than guess.
			g.M.ReadFallbacks.WithLabelValues("incomplete").Inc()
			return durable()
		}
		if err := g.hydrateUnread(ctx, user, view); threadcalls.SetsHydrating(err) {
			g.M.ReadFallbacks.WithLabelValues("hydrating").Inc()
			return durable()
		} else if err != nil {
			if cerr := seam.ContextError(ctx, err); cerr != nil {
				return nil, false, cerr
			}
			return nil, false, seam.UnavailableError(fmt.Errorf("reading durable state (real-time view incomplete): %w; retry", err))
		}
	}
}

// hydrateUnread copies from Postgres into Redis what view says Redis
// lacks. A Redis failure here is only logged: the next read tells.
func (g *Gate) hydrateUnread(ctx context.Context, user string, view unread.UnreadView) error {
	g.M.ReadFallbacks.WithLabelValues("incomplete").Inc()
	hydrate := func(op string, do func(context.Context) error) {
		if err := do(ctx); err != nil {
			g.M.RedisDegraded.WithLabelValues(seam.RedisOpHydrate).Inc()
			g.WarnRedis(ctx, seam.RedisOpHydrate+" "+op, err)
		}
	}
	if !view.CursorsComplete {
		if err := g.Restore.Cursors(ctx, []string{user}); err != nil {
			return err
		}
	}
	// What Postgres answers below must hold what Redis lost.
	keys := []string{g.CursorStore().RedisKey(user)}
	for _, ch := range view.MissingHeads {
		keys = append(keys, g.HeadStore().RedisKey(ch))
	}
	if !view.MembershipsComplete || len(view.MissingHeads) > 0 {
		if _, err := g.Restore.Settle(ctx, keys...); err != nil {
			return err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	if !view.MembershipsComplete {
		regs, mentions, err := g.durableMemberships(ctx, user)
		if err != nil {
			return err
		}
		hydrate("memberships", func(c context.Context) error {
			// The mentions first: the view is complete once both hashes are.
			if err := g.MentionStore().HydrateRedis(c, user, mentions); err != nil {
				return err
			}
			return g.MemberStore().HydrateMemberships(c, user, regs)
		})
	}
	if len(view.MissingHeads) > 0 {
		heads, err := g.HeadStore().ReadPG(pctx, view.MissingHeads)
		if err != nil {
			return fmt.Errorf("reading the heads of %d channels: %w", len(view.MissingHeads), err)
		}
		found := map[string]bool{}
		for _, h := range heads {
			found[h.Channel] = true
		}
		var none []string
		for _, ch := range view.MissingHeads {
			if !found[ch] {
				none = append(none, ch)
			}
		}
		hydrate("heads", func(c context.Context) error { return g.HeadStore().HydrateRedis(c, heads, none) })
	}
	return g.hydrateChannelSets(ctx, view)
}

// durableMemberships reads every membership register and the mentions of
// a user from Postgres, in pages (the hash they hydrate is marked
// complete: a cut-short read would hide the channels past it).
func (g *Gate) durableMemberships(ctx context.Context, user string) ([]channel.Membership, []channel.Mentions, error) {
	var regs []channel.Membership
	var mentions []channel.Mentions
	after := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		page, err := g.MemberStore().UserPagePG(pctx, user, after, seam.RestorePage)
		var ms []channel.Mentions
		if err == nil {
			upTo := ""
			if len(page) == seam.RestorePage {
				upTo = page[len(page)-1].Key.Channel
			}
			ms, err = g.MentionStore().RangePG(pctx, user, after, upTo)
		}
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("reading the memberships of %s: %w", user, err)
		}
		regs, mentions = append(regs, page...), append(mentions, ms...)
		if len(page) < seam.RestorePage {
			return regs, mentions, nil
		}
		if len(regs) >= seam.MaxRestoreChannels {
			return nil, nil, fmt.Errorf("reading the memberships of %s: more than %d channels", user, seam.MaxRestoreChannels)
		}
		after = page[len(page)-1].Key.Channel
	}
}

// hydrateChannelSets copies from Postgres into Redis the deletions and
// group mentions of the channels whose Redis does not know them.
func (g *Gate) hydrateChannelSets(ctx context.Context, view unread.UnreadView) error {
	var errs []error
	if len(view.MissingGroupMentions) > 0 {
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		errs = append(errs, g.hydrateGroupMentions(pctx, view.MissingGroupMentions, func(op string, do func(context.Context) error) {
			if err := do(ctx); err != nil {
				g.M.RedisDegraded.WithLabelValues(seam.RedisOpHydrate).Inc()
				g.WarnRedis(ctx, seam.RedisOpHydrate+" "+op, err)
			}
		}))
		cancel()
	}
	if len(view.MissingDeletions) > 0 {
		errs = append(errs, g.hydrateDeletions(ctx, view.MissingDeletions))
	}
	return errors.Join(errs...)
}

// hydrateDeletions copies the listed channels' deletions from Postgres
// into Redis and marks them known (hydrateSets); errSetsHydrating when
// some are large and copied in the background. A Redis failure is only
// logged.
func (g *Gate) hydrateDeletions(ctx context.Context, channels []string) error {
	if err := g.Settled(ctx, nil, channels); err != nil {
		return err
	}
	refs := make([]thread.Ref, len(channels))
	for i, ch := range channels {
		refs[i].Channel = ch
	}
	deferred, err := g.HydrateSets(ctx, refs)
	if err != nil {
		tracing.Logger(ctx, g.Log).Warn("reading deletions to hydrate", zap.Error(err))
		return err
	}
	if len(deferred) > 0 {
		return threadcalls.ErrSetsHydrating
	}
	return nil
}

// durableUnread computes the counts from Postgres alone.
func (g *Gate) durableUnread(ctx context.Context, user string, channels []string) ([]unread.ChannelView, error) {
	// Redis is away (or lacks the user): Postgres answers once it holds
	// what was in flight. The user's keys stand for the channels' (one
	// marker, or one fence of the reader's own with Redis away).
	err := g.Settled(ctx, []string{user}, nil)
	var views []unread.ChannelView
	if err == nil {
		views, err = g.durableViews(ctx, user, channels)
	}
	if err != nil {
		if cerr := seam.ContextError(ctx, err); cerr != nil {
			return nil, cerr
		}
		tracing.Logger(ctx, g.Log).Warn("reading durable unread state", zap.Error(err))
		return nil, seam.UnavailableError(fmt.Errorf("reading durable state (real-time view unavailable): %w; retry", err))
	}
	return views, nil
}

func (g *Gate) durableViews(ctx context.Context, user string, channels []string) ([]unread.ChannelView, error) {
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	return g.unreadStore().ReadPG(pctx, user, channels)
}

// unreadStore is the unread view's storage on the gate's stores,
// counting with the configured mention cap.
func (g *Gate) unreadStore() unread.Store {
	return unread.NewStore(g.PG, g.Redis).WithMentionCap(g.Cfg.MentionCap)
}

// MarkUnread implements receiptsv1connect.ReceiptServiceHandler. It moves
// only the user's private read, to the epoch after the one the client saw
// (the stored one when it sent none), so others never see the public read
// move back and the same call with the same epoch changes nothing twice.
// The stored epoch is one only Redis knows at once (Postgres may not have
// the latest mark-unread yet), so without Redis the call is Unavailable
// and nothing is acknowledged.
func (g *Gate) MarkUnread(ctx context.Context, req *connect.Request[receiptsv1.MarkUnreadRequest]) (*connect.Response[receiptsv1.MarkResponse], error) {
	r := req.Msg
	m, err := markcalls.ValidateMark(markcalls.MarkInput{User: r.GetUserId(), Channel: r.GetChannelId(), Kind: receiptsv1.Kind_READ, Seq: r.GetSeq(), DeviceID: r.GetDeviceId(), Epoch: r.Epoch})
	if err != nil {
		return nil, err
	}
	if err := g.CheckMarks(ctx, []markcalls.Mark{m}); err != nil {
		return nil, err
	}
	now := g.NowMs()
	unread := func(ctx context.Context) (cursors.MergeResult, error) {
		if err := g.Restore.SettleDegraded(ctx, []string{m.Key.User}); err != nil {
			return cursors.MergeResult{}, err
		}
		return g.CursorStore().MarkUnread(ctx, m.Key, m.Seq, m.Epoch, m.DeviceID, now)
	}
	var res cursors.MergeResult
	w, err := seam.WriteUser(ctx, g.Core, seam.UserWrite[receipt.State]{
		User: m.Key.User, Encode: event.Encode, Cursors: true,
		// The record's size does not depend on the epoch Redis resolves.
		Largest: receipt.MarkUnread(m.Key, m.Seq, receipt.MaxEpoch-1),
		Change: func(ctx context.Context) (receipt.State, int64, error, error) {
			var err error
			res, err = unread(ctx)
			if errors.Is(err, redisstore.ErrNotLoaded) {
				// Redis lost the user's cursors (or never restored them):
				// the epoch to move past is the restored one.
				if err = g.Restore.Cursors(ctx, []string{m.Key.User}); err == nil {
					res, err = unread(ctx)
				}
			}
			switch {
			case errors.Is(err, receipt.ErrEpochLimit):
				return receipt.State{}, 0, nil, apierr.New(connect.CodeFailedPrecondition, apierr.EpochLimit, err, apierr.Field("seq"))
			case err != nil:
				return receipt.State{}, 0, err, nil
			case res.EpochAhead:
				return receipt.State{}, 0, nil, markcalls.EpochAhead(m, res.SeenEpoch)
			}
			// No publishView: the public read does not move, so others
			// see nothing. Stamped with the erasure generation the script
			// read: an erasure drops the event only if it came first in
			// Redis (tombstone.Drops), whatever the clocks say.
			return res.Resolved, res.Generation, nil, nil
		},
		Degraded: func(_ receipt.State, err error) (receipt.State, error) {
			if cerr := seam.ContextError(ctx, err); cerr != nil {
				return receipt.State{}, cerr
			}
			return receipt.State{}, seam.UnavailableError(fmt.Errorf("marking unread needs the real-time store to order it after the current epoch: %w; nothing was acknowledged, retry", err),
				apierr.RetryAfter(g.Cfg.RetryAfter))
		},
	})
	if err != nil {
		return nil, err
	}
	durability := w.Durability
	return connect.NewResponse(&receiptsv1.MarkResponse{Result: &receiptsv1.ReceiptResult{
		State: event.StateToProto(res.State), Advanced: res.Advanced, Durability: durability, Epoch: res.SeenEpoch,
		RealtimeDegraded: w.Degraded,
	}}), nil
}

// ReadAll implements receiptsv1connect.ReceiptServiceHandler: a public
// read at the head of every listed channel (default: the user's channels)
// whose public or own read position is behind it, through the mark write
// path. A
// listed channel the user may not mark fails the call (nothing written);
// in the default set such channels (a cursor left in a channel the user
// is not a member of) are skipped.
func (g *Gate) ReadAll(ctx context.Context, req *connect.Request[receiptsv1.ReadAllRequest]) (*connect.Response[receiptsv1.ReadAllResponse], error) {
	r := req.Msg
	user := r.GetUserId()
	channels, err := validateChannelList(user, r.GetChannelId(), g.Cfg.MaxUnreadChannels)
	if err != nil {
		return nil, err
	}
	if err := receipt.ValidateOptionalID("device_id", r.GetDeviceId()); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	views, err := g.unread(ctx, user, channels)
	if err != nil {
		return nil, err
	}
	var marks []markcalls.Mark
	for _, v := range views {
		// Behind for others, or for the user alone after a mark-unread.
		if v.Head.Seq > v.State.Read.Position.Seq || v.Head.Seq > v.State.EffectiveRead().Seq {
			marks = append(marks, markcalls.Mark{Key: receipt.Key{User: user, Channel: v.Channel}, Kind: receiptsv1.Kind_READ,
				Seq: v.Head.Seq, MessageID: v.Head.MessageID, DeviceID: r.GetDeviceId(), Epoch: receipt.EpochCurrent,
				Field: "channel_id[" + v.Channel + "]."})
		}
	}
	if len(channels) == 0 && !g.Cfg.AllowNonMemberMarks && len(marks) > 0 {
		keys := make([]receipt.Key, len(marks))
		for i, m := range marks {
			keys[i] = m.Key
		}
		f := g.Lookup(ctx, keys, false)
		marks = slices.DeleteFunc(marks, func(m markcalls.Mark) bool { return f.Known && g.CheckMark(f, m) != nil })
	}
	// Each mark is a write, as in a MarkReceipts batch.
	if err := seam.Charge(ctx, len(marks)); err != nil {
		return nil, err
	}
	out := &receiptsv1.ReadAllResponse{}
	for start := 0; start < len(marks); start += g.Cfg.MaxBatchItems {
		res, err := g.Write(ctx, marks[start:min(start+g.Cfg.MaxBatchItems, len(marks))])
		if err != nil {
			return nil, err
		}
		out.Results = append(out.Results, res...)
	}
	if err := g.ReadAllThreads(ctx, user, channels, r.GetDeviceId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}
