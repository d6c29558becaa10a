package threadcalls

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// Bounds of ListThreads.
const (
	threadsPageDefault = 50
	threadsPageMax     = 1000
)

// threadsOrDurable answers a read of the user's thread registers (of one
// channel, or all) from Redis (states, complete, err): states when
// complete, else Postgres' registers with Redis' merged over them (the
// hash hydrated when Redis answered).
func (g *Threads) threadsOrDurable(ctx context.Context, user, ch string, states []thread.State, complete bool, err error) ([]thread.State, error) {
	if errors.Is(err, threads.ErrTooMany) {
		return nil, apierr.New(connect.CodeFailedPrecondition, apierr.InvalidField, err, apierr.Field("user_id"))
	}
	var incs []redisstore.Incarnation
	return seam.Read(ctx, g.Core, states, complete, err, seam.ReadThrough[[]thread.State]{
		// Postgres answers once it holds what Redis may have lost
		// (seam/restore.go).
		Settle: func(ctx context.Context) (err error) {
			incs, err = g.Restore.Settle(ctx, g.ThreadStore().RedisKey(user))
			return err
		},
		Durable: func(ctx context.Context, redisUp bool) ([]thread.State, error) {
			if !redisUp {
				return seam.Postgres(ctx, g.Core, func(ctx context.Context) ([]thread.State, error) {
					return g.ThreadStore().UserStatesPG(ctx, user, "", threads.MaxUserThreads)
				})
			}
			rows, herr := g.hydrateThreads(ctx, user, incs[0])
			if herr != nil && rows != nil {
				g.WarnRedis(ctx, seam.RedisOpHydrate, herr)
				herr = nil
			}
			return rows, herr
		},
		// What Redis holds (newer writes) merged over the rows.
		Merge: func(rows, states []thread.State) []thread.State {
			byKey := map[thread.Key]thread.State{}
			for _, st := range append(rows, states...) {
				if ch != "" && st.Key.Channel != ch {
					continue
				}
				byKey[st.Key], _ = thread.Merge(byKey[st.Key], st, g.Cfg.MentionCap)
			}
			out := make([]thread.State, 0, len(byKey))
			for _, st := range byKey {
				out = append(out, st)
			}
			slices.SortFunc(out, func(a, b thread.State) int { return a.Key.Compare(b.Key) })
			return out
		},
	})
}

// FollowedThread is one counted thread of a user. The register is
// pointed to: a list of a thousand is sorted by activity.
type FollowedThread struct {
	State *thread.State
	Head  thread.Head
	// Counts are the register's at the head less the deleted replies
	// (countThreads).
	Counts thread.Counts
}

// FollowedThreads is the threads a user follows that count (the follow is
// active in the channel), with their heads: two Redis round trips when
// Redis holds the user's hashes whole (the registers with the
// memberships, then the heads).
func (g *Threads) FollowedThreads(ctx context.Context, user, ch string) ([]FollowedThread, error) {
	states, regs, err := g.userThreadsAndRegisters(ctx, user, ch)
	if err != nil || len(states) == 0 {
		return nil, err
	}
	refs := make([]thread.Ref, 0, len(states))
	kept := states[:0]
	for _, st := range states {
		if activeFollow(st, regs[st.Key.Channel]) {
			kept = append(kept, st)
			refs = append(refs, st.Key.Ref)
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	heads, err := g.ThreadHeads(ctx, refs)
	if err != nil {
		return nil, err
	}
	out := make([]FollowedThread, len(kept))
	for i := range kept {
		st := &kept[i]
		h := heads[i]
		h.Ref = st.Key.Ref
		out[i] = FollowedThread{State: st, Head: h}
	}
	if err := g.countThreads(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// userThreadsAndRegisters is the user's thread registers (threadsOrDurable)
// and the user's membership registers of the channels of those followed:
// one script when Redis holds the registers' hash whole, else each read
// on its own with its fallback.
func (g *Threads) userThreadsAndRegisters(ctx context.Context, user, ch string) ([]thread.State, map[string]channel.Membership, error) {
	r, err := g.ThreadStore().UserThreadsWithMemberships(ctx, user, ch)
	if err == nil && r.Complete {
		if len(r.States) == 0 {
			return nil, nil, nil
		}
		regs, err := g.registersOrDurable(ctx, user, followedChannels(r.States), r.Memberships, r.MembershipsComplete)
		return r.States, regs, err
	}
	states, serr := g.threadsOrDurable(ctx, user, ch, r.States, r.Complete, err)
	if serr != nil || len(states) == 0 {
		return nil, nil, serr
	}
	if err != nil {
		// Redis failed the read: the memberships from Postgres alone.
		regs, err := g.registersOrDurable(ctx, user, followedChannels(states), nil, false)
		return states, regs, err
	}
	// Hydrated: channels the script did not see may be among them.
	regs, err := g.userRegisters(ctx, user, followedChannels(states))
	return states, regs, err
}

// followedChannels is the channels of the registers that follow, each once.
func followedChannels(states []thread.State) []string {
	var chans []string
	seen := map[string]bool{}
	for _, st := range states {
		if st.Follow.Following && !seen[st.Key.Channel] {
			seen[st.Key.Channel] = true
			chans = append(chans, st.Key.Channel)
		}
	}
	return chans
}

// userRegisters is the user's membership registers in chans (Redis, else
// Postgres); a channel without one is absent.
func (g *Threads) userRegisters(ctx context.Context, user string, chans []string) (map[string]channel.Membership, error) {
	if len(chans) == 0 {
		return nil, nil
	}
	regs, complete, err := g.MemberStore().Memberships(ctx, user, chans)
	if err != nil {
		g.WarnRedis(ctx, seam.RedisOpGet, err)
	}
	return g.registersOrDurable(ctx, user, chans, regs, err == nil && complete)
}

// registersOrDurable is regs (read from Redis) by channel, with Postgres'
// registers of chans merged in unless Redis' hash was complete.
func (g *Threads) registersOrDurable(ctx context.Context, user string, chans []string, regs []channel.Membership, complete bool) (map[string]channel.Membership, error) {
	regs, err := seam.Read(ctx, g.Core, regs, complete || len(chans) == 0, nil, seam.ReadThrough[[]channel.Membership]{
		Settle: func(ctx context.Context) error { return g.Settled(ctx, []string{user}, nil) },
		Durable: func(ctx context.Context, _ bool) ([]channel.Membership, error) {
			return seam.Postgres(ctx, g.Core, func(ctx context.Context) ([]channel.Membership, error) {
				return g.MemberStore().ReadPG(ctx, user, chans)
			})
		},
		Merge: func(rows, regs []channel.Membership) []channel.Membership { return append(regs, rows...) },
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]channel.Membership, len(regs))
	for _, r := range regs {
		out[r.Key.Channel], _ = channel.MergeMembership(out[r.Key.Channel], r)
	}
	return out, nil
}

// ListThreads implements receiptsv1connect.ReceiptServiceHandler: the
// user's followed threads, newest activity first, then by (channel, root).
func (g *Threads) ListThreads(ctx context.Context, req *connect.Request[receiptsv1.ListThreadsRequest]) (*connect.Response[receiptsv1.ListThreadsResponse], error) {
	r := req.Msg
	if err := receipt.ValidateID("user_id", r.GetUserId()); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	if r.GetChannelId() != "" {
		if err := receipt.ValidateID("channel_id", r.GetChannelId()); err != nil {
			return nil, seam.Invalid(apierr.InvalidID, err)
		}
	}
	limit := int(r.GetLimit())
	switch {
	case limit == 0:
		limit = threadsPageDefault
	case limit < 0 || limit > threadsPageMax:
		return nil, seam.Invalid(apierr.InvalidField, &receipt.FieldError{Field: "limit", Reason: fmt.Sprintf("is %d; it must be 1 to %d", limit, threadsPageMax)}, apierr.Limit(threadsPageMax))
	}
	after, hasAfter, err := DecodeActivityToken(r.GetPageToken(), false)
	if err != nil {
		return nil, err
	}
	ts, err := g.FollowedThreads(ctx, r.GetUserId(), r.GetChannelId())
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ts, func(a, b FollowedThread) int { return CompareActivity(&a.Head, &b.Head) })
	start := 0
	if hasAfter {
		start, _ = slices.BinarySearchFunc(ts, after, func(t FollowedThread, pos thread.Head) int {
			if c := CompareActivity(&t.Head, &pos); c != 0 {
				return c
			}
			return -1 // the token's own thread is before the page
		})
	}
	out := &receiptsv1.ListThreadsResponse{UserId: r.GetUserId()}
	end := min(len(ts), start+limit)
	if end > start {
		// One allocation for the page's messages, not four per thread.
		page := ts[start:end]
		units := make([]receiptsv1.ThreadUnread, len(page))
		positions := make([]receiptsv1.Position, 3*len(page))
		out.Threads = make([]*receiptsv1.ThreadUnread, len(page))
		for i, t := range page {
			out.Threads[i] = g.fillThreadUnread(&units[i], positions[3*i:3*i+3], *t.State, t.Head, t.Counts, true)
		}
	}
	if end < len(ts) {
		out.NextPageToken = EncodeActivityToken(ts[end-1].Head)
	}
	for _, add := range g.Parts.Threads {
		if err := add(ctx, r.GetUserId(), out); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(out), nil
}

// CompareActivity orders threads newest activity first, then by thread.
// It takes pointers: the inbox compares each of a user's channels with
// its page's last, without copying two heads each time.
func CompareActivity(a, b *thread.Head) int {
	if a.UpdatedAtUnixMs != b.UpdatedAtUnixMs {
		if a.UpdatedAtUnixMs > b.UpdatedAtUnixMs {
			return -1
		}
		return 1
	}
	return a.Ref.Compare(b.Ref)
}

// EncodeActivityToken is the page token of a list ordered by activity
// (CompareActivity: threads, the inbox's lines): its last item's
// (activity, root, channel); root 0 is a channel's own line, only in the
// inbox (channelLines).
func EncodeActivityToken(h thread.Head) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(h.UpdatedAtUnixMs, 10) + " " + strconv.FormatInt(h.Root, 10) + " " + h.Channel))
}

func DecodeActivityToken(tok string, channelLines bool) (thread.Head, bool, error) {
	if tok == "" {
		return thread.Head{}, false, nil
	}
	bad := seam.Invalid(apierr.InvalidField, &receipt.FieldError{Field: "page_token", Reason: "is not a token this call gave"})
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return thread.Head{}, false, bad
	}
	parts := strings.SplitN(string(b), " ", 3)
	if len(parts) != 3 {
		return thread.Head{}, false, bad
	}
	at, err1 := strconv.ParseInt(parts[0], 10, 64)
	root, err2 := strconv.ParseInt(parts[1], 10, 64)
	ref := thread.Ref{Channel: parts[2], Root: root}
	valid := ref.Validate() == nil || (channelLines && root == 0 && receipt.ValidateID("channel_id", ref.Channel) == nil)
	if err1 != nil || err2 != nil || at < 0 || !valid {
		return thread.Head{}, false, bad
	}
	return thread.Head{Ref: ref, UpdatedAtUnixMs: at}, true, nil
}

// ThreadCounts is a user's thread counts in one channel.
type ThreadCounts struct {
	UnreadThreads, Mentions int64
}

// ThreadCountsOrNone is threadCountsByChannel, and none when the threads
// cannot be read: a thread problem never fails a user's channel counts
// (a caller that left still ends the call).
func (g *Threads) ThreadCountsOrNone(ctx context.Context, user string) (map[string]ThreadCounts, error) {
	threads, err := g.threadCountsByChannel(ctx, user)
	if err == nil {
		return threads, nil
	}
	if cerr := seam.ContextError(ctx, err); cerr != nil {
		return nil, cerr
	}
	g.WarnRedis(ctx, seam.RedisOpGet+" threads", err)
	return nil, nil
}

// threadCountsByChannel sums the user's followed threads per channel.
func (g *Threads) threadCountsByChannel(ctx context.Context, user string) (map[string]ThreadCounts, error) {
	ts, err := g.FollowedThreads(ctx, user, "")
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	out := map[string]ThreadCounts{}
	for _, t := range ts {
		c := t.Counts
		if c.Unread == 0 {
			continue
		}
		tc := out[t.State.Key.Channel]
		tc.UnreadThreads++
		tc.Mentions += c.Mentions
		out[t.State.Key.Channel] = tc
	}
	return out, nil
}

// threadSight is what a thread's read-by and ticks derive from: the
// channel's members (small channels only) with their settings and their
// thread registers.
type threadSight struct {
	ref         thread.Ref
	head        thread.Head
	memberCount int64
	detailed    bool
	members     []string
	sharesRead  map[string]bool
	states      map[string]thread.State
}

func (g *Threads) threadSight(ctx context.Context, ref thread.Ref) (*threadSight, error) {
	n, err := g.readBy.MemberCount(ctx, ref.Channel)
	if err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	s := &threadSight{ref: ref, memberCount: n, detailed: n <= g.Cfg.ReadBy.Threshold()}
	heads, err := g.ThreadHeads(ctx, []thread.Ref{ref})
	if err != nil {
		return nil, err
	}
	s.head = heads[0]
	if !s.detailed {
		return s, nil // threads keep no per-channel counts: a large channel answers its size only
	}
	regs, err := g.readBy.MembersOf(ctx, ref.Channel)
	if err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	for _, r := range regs {
		if r.Member {
			s.members = append(s.members, r.Key.User)
		}
	}
	slices.Sort(s.members)
	if len(s.members) == 0 {
		return s, nil
	}
	settings, err := g.readBy.SettingsOf(ctx, s.members)
	if err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	s.sharesRead = make(map[string]bool, len(s.members))
	for _, u := range s.members {
		s.sharesRead[u] = settings[u].ShareRead
	}
	keys := make([]thread.Key, len(s.members))
	for i, u := range s.members {
		keys[i] = thread.Key{User: u, Ref: ref}
	}
	s.states = make(map[string]thread.State, len(keys))
	got, rerr := g.ThreadStore().StatesRedis(ctx, keys)
	var missing []string
	for i, u := range s.members {
		if rerr == nil && got[i] != nil {
			s.states[u] = *got[i]
		} else {
			missing = append(missing, u)
		}
	}
	if len(missing) > 0 {
		if err := g.Settled(ctx, missing, nil); err != nil {
			return nil, g.DurableErr(ctx, err)
		}
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		rows, err := g.ThreadStore().MemberStatesPG(pctx, ref, missing)
		cancel()
		if err != nil {
			return nil, g.DurableErr(ctx, err)
		}
		for _, st := range rows {
			s.states[st.Key.User] = st
		}
	}
	return s, nil
}

// GetThreadMessageReceipts implements receiptsv1connect.ReceiptServiceHandler.
func (g *Threads) GetThreadMessageReceipts(ctx context.Context, req *connect.Request[receiptsv1.GetThreadMessageReceiptsRequest]) (*connect.Response[receiptsv1.MessageReceipts], error) {
	r := req.Msg
	ref, err := ThreadRef(r.GetChannelId(), r.GetRootSeq())
	if err != nil {
		return nil, err
	}
	if err := receipt.ValidateSeq("seq", r.GetSeq()); err != nil {
		return nil, seam.Invalid(apierr.InvalidSeq, err)
	}
	if err := receipt.ValidateOptionalID("sender_id", r.GetSenderId()); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	s, err := g.threadSight(ctx, ref)
	if err != nil {
		return nil, err
	}
	out := &receiptsv1.MessageReceipts{ChannelId: ref.Channel, ThreadRootSeq: ref.Root, Seq: r.GetSeq(),
		Detailed: s.detailed, MemberCount: s.memberCount, SenderId: r.GetSenderId()}
	if !s.detailed {
		return connect.NewResponse(out), nil
	}
	for _, u := range s.members {
		if u == r.GetSenderId() {
			continue
		}
		st := s.states[u]
		switch {
		case !s.sharesRead[u]:
			out.Pending = append(out.Pending, u)
		case st.Cursors.Read.Position.Seq >= r.GetSeq():
			out.ReadBy = append(out.ReadBy, &receiptsv1.MemberAt{UserId: u})
			out.DeliveredTo = append(out.DeliveredTo, &receiptsv1.MemberAt{UserId: u})
		default:
			if st.Cursors.Delivered.Position.Seq >= r.GetSeq() {
				out.DeliveredTo = append(out.DeliveredTo, &receiptsv1.MemberAt{UserId: u})
			}
			out.Pending = append(out.Pending, u)
		}
	}
	out.ReadCount, out.DeliveredCount = int64(len(out.ReadBy)), int64(len(out.DeliveredTo))
	return connect.NewResponse(out), nil
}

// GetThreadTicks implements receiptsv1connect.ReceiptServiceHandler.
func (g *Threads) GetThreadTicks(ctx context.Context, req *connect.Request[receiptsv1.GetThreadTicksRequest]) (*connect.Response[receiptsv1.ChannelTicks], error) {
	ref, err := ThreadRef(req.Msg.GetChannelId(), req.Msg.GetRootSeq())
	if err != nil {
		return nil, err
	}
	s, err := g.threadSight(ctx, ref)
	if err != nil {
		return nil, err
	}
	out := &receiptsv1.ChannelTicks{ChannelId: ref.Channel, ThreadRootSeq: ref.Root, MemberCount: s.memberCount, Detailed: s.detailed}
	if s.head.Seq > 0 {
		out.Head = &receiptsv1.Position{Seq: s.head.Seq}
	}
	if !s.detailed {
		return connect.NewResponse(out), nil
	}
	leastRead, leastDel := int64(-1), int64(-1)
	for _, u := range s.members {
		mc := &receiptsv1.MemberCursors{UserId: u}
		if s.sharesRead[u] {
			st := s.states[u]
			mc.Read = seam.PositionProto(st.Cursors.Read.Position)
			mc.Delivered = seam.PositionProto(st.Cursors.Delivered.Position)
			if leastRead < 0 || st.Cursors.Read.Position.Seq < leastRead {
				leastRead = st.Cursors.Read.Position.Seq
			}
			if leastDel < 0 || st.Cursors.Delivered.Position.Seq < leastDel {
				leastDel = st.Cursors.Delivered.Position.Seq
			}
		}
		out.Members = append(out.Members, mc)
	}
	out.ReadByAllUpTo, out.DeliveredToAllUpTo = max(leastRead, 0), max(leastDel, 0)
	return connect.NewResponse(out), nil
}

// ReadAllThreads reads every followed thread with unread replies (in the
// listed channels, or all) up to its head, at its current epoch.
func (g *Threads) ReadAllThreads(ctx context.Context, user string, channels []string, device string) error {
	ts, err := g.FollowedThreads(ctx, user, "")
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, ch := range channels {
		listed[ch] = true
	}
	var (
		keys  []thread.Key
		heads []thread.Head
	)
	for _, t := range ts {
		if (len(channels) == 0 || listed[t.State.Key.Channel]) && t.Counts.Unread > 0 {
			keys, heads = append(keys, t.State.Key), append(heads, t.Head)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := seam.Charge(ctx, len(keys)); err != nil {
		return err
	}
	now := g.NowMs()
	_, _, _, err = g.writeThreads(ctx, keys, nil, func(i int, stored thread.State) (thread.State, error) {
		pos := receipt.Position{Epoch: stored.Cursors.Canonical().ReadEpoch(), Seq: heads[i].Seq}
		return thread.State{Key: keys[i], Cursors: receipt.State{
			Read:      receipt.Cursor{Position: pos, MessageID: heads[i].MessageID},
			Delivered: receipt.Cursor{Position: receipt.Position{Seq: heads[i].Seq}, MessageID: heads[i].MessageID},
			DeviceID:  device, UpdatedAtUnixMs: now,
		}}, nil
	})
	return err
}
