package threadcalls

// Threads: the write path. A thread write needs Redis (as mark-unread
// does): the register's merge reads the stored epoch and follow there, and
// the write is refused (Unavailable, nothing acknowledged) when Redis
// cannot answer. Postgres then holds every acknowledged write through
// Kafka, and the drift sweep and the hydrate keep the two in step.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// errStaleEpoch marks a thread read of an older epoch: a no-op.
var errStaleEpoch = errors.New("stale epoch")

// ThreadRef validates a thread's ids as a call names them.
func ThreadRef(ch string, root int64) (thread.Ref, error) {
	if err := receipt.ValidateID("channel_id", ch); err != nil {
		return thread.Ref{}, seam.Invalid(apierr.InvalidID, err)
	}
	if err := receipt.ValidateSeq("root_seq", root); err != nil {
		return thread.Ref{}, seam.Invalid(apierr.InvalidSeq, err)
	}
	return thread.Ref{Channel: ch, Root: root}, nil
}

func threadKey(user, ch string, root int64) (thread.Key, error) {
	if err := receipt.ValidateID("user_id", user); err != nil {
		return thread.Key{}, seam.Invalid(apierr.InvalidID, err)
	}
	ref, err := ThreadRef(ch, root)
	return thread.Key{User: user, Ref: ref}, err
}

// checkThread checks a user's write in a thread against the channel: the
// user is a member (where the channel tracks membership) and the root is
// at or below the channel's head. It returns the facts it read.
func (g *Threads) checkThread(ctx context.Context, k thread.Key) (*seam.Facts, error) {
	f := g.Lookup(ctx, []receipt.Key{k.ChannelKey()}, true)
	if !f.Known {
		return f, seam.UnavailableError(errors.New("checking a thread write needs the real-time store; nothing was written, retry"), apierr.RetryAfter(g.Cfg.RetryAfter))
	}
	if head := f.Head(k.Channel); k.Root > head {
		return f, seam.HeadBehind("root_seq", k.Root, head)
	}
	if member, registered := f.Member(k.ChannelKey()); registered && !member && !g.Cfg.AllowNonMemberMarks {
		return f, seam.NotMember("", k.ChannelKey())
	}
	return f, nil
}

// checkThreadSeq is checkThread for a mark at seq, which must be at or
// below the thread's head; it returns the head too.
func (g *Threads) checkThreadSeq(ctx context.Context, k thread.Key, seq int64) (*seam.Facts, thread.Head, error) {
	f, err := g.checkThread(ctx, k)
	if err != nil {
		return nil, thread.Head{}, err
	}
	heads, err := g.ThreadHeads(ctx, []thread.Ref{k.Ref})
	if err != nil {
		return nil, thread.Head{}, err
	}
	if head := heads[0]; seq > head.Seq {
		return nil, thread.Head{}, seam.HeadBehind("seq", seq, head.Seq)
	}
	return f, heads[0], nil
}

// ThreadHeads returns threads' heads, in refs' order: Redis, else
// Postgres (copied into Redis by a merge); the zero head when the thread
// has no reply.
func (g *Threads) ThreadHeads(ctx context.Context, refs []thread.Ref) ([]thread.Head, error) {
	got, err := g.ThreadStore().HeadsAt(ctx, refs)
	if err != nil {
		g.WarnRedis(ctx, seam.RedisOpGet, err)
		got = make([]thread.Head, len(refs))
	}
	var missing []thread.Ref
	for i, h := range got {
		if h.Ref.Channel == "" {
			missing = append(missing, refs[i])
		}
	}
	if len(missing) == 0 {
		return got, nil
	}
	perr := g.Settled(ctx, nil, refChannels(missing))
	var heads []thread.Head
	if perr == nil {
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		heads, perr = g.ThreadStore().HeadsPG(pctx, missing)
		cancel()
	}
	if perr != nil {
		if cerr := seam.ContextError(ctx, perr); cerr != nil {
			return nil, cerr
		}
		return nil, seam.UnavailableError(fmt.Errorf("reading %d thread heads: %w; retry", len(missing), perr), apierr.RetryAfter(g.Cfg.RetryAfter))
	}
	durable := make(map[thread.Ref]thread.Head, len(heads))
	for _, h := range heads {
		durable[h.Ref] = h
	}
	for i, h := range got {
		if h.Ref.Channel == "" {
			got[i] = durable[refs[i]]
		}
	}
	if len(heads) > 0 && err == nil {
		if _, err := g.ThreadStore().RaiseHeads(ctx, heads); err != nil {
			g.WarnRedis(ctx, seam.RedisOpHydrate, err)
		}
	}
	return got, nil
}

// restoreThreadsAndRetry restores the users whose thread writes found
// their hash not loaded (Redis lost it, or never restored it) and writes
// those keys again with update, once, setting their results in res.
//
// A register collected from the user's hash (threads.ErrCollected) is read
// from Postgres and merged in first, and written again as known.
func (g *Threads) restoreThreadsAndRetry(ctx context.Context, keys []thread.Key, res []threads.StateResult,
	update func(context.Context, []int, map[thread.Key]bool) ([]threads.StateResult, error)) error {
	var idx []int
	var collected []thread.Key
	seen := map[string]bool{}
	for i, r := range res {
		switch {
		case errors.Is(r.Err, threads.ErrCollected):
			idx = append(idx, i)
			collected = append(collected, keys[i])
		case errors.Is(r.Err, redisstore.ErrNotLoaded):
			idx = append(idx, i)
			if u := keys[i].User; !seen[u] {
				seen[u] = true
				if err := g.restoreThreads(ctx, u); err != nil {
					return err
				}
			}
		}
	}
	if len(idx) == 0 {
		return nil
	}
	var known map[thread.Key]bool
	if len(collected) > 0 {
		var err error
		if known, err = g.restoreCollected(ctx, collected); err != nil {
			return err
		}
	}
	again, err := update(ctx, idx, known)
	if err != nil {
		return err
	}
	for j, i := range idx {
		res[i] = again[j]
	}
	return nil
}

// writeThreads merges each key's incoming register (built from the stored
// one) into Redis, then makes every register not refused durable, with
// the thread heads of extra, stamped with the erasure generation its
// merge read. It returns the merge results and the durability.
func (g *Threads) writeThreads(ctx context.Context, keys []thread.Key, heads []thread.Head,
	incoming func(i int, stored thread.State) (thread.State, error),
) ([]threads.StateResult, []threads.HeadResult, receiptsv1.Durability, error) {
	var sent, stored []thread.State
	if len(keys) > 0 {
		sent, stored = make([]thread.State, len(keys)), make([]thread.State, len(keys))
	}
	var raised []threads.HeadResult
	if len(heads) > 0 {
		var err error
		if raised, err = g.ThreadStore().RaiseHeads(ctx, heads); err != nil {
			return nil, nil, 0, g.threadUnavailable(ctx, err)
		}
		for _, r := range raised {
			if r.Err != nil {
				return nil, nil, 0, g.threadUnavailable(ctx, r.Err)
			}
		}
	}
	var res []threads.StateResult
	if len(keys) > 0 {
		update := func(ctx context.Context, idx []int, known map[thread.Key]bool) ([]threads.StateResult, error) {
			sub := make([]thread.Key, len(idx))
			for j, i := range idx {
				sub[j] = keys[i]
			}
			return g.ThreadStore().UpdateStates(ctx, sub, known, func(j int, was thread.State, _ bool) (thread.State, error) {
				i := idx[j]
				in, err := incoming(i, was)
				// The last call is the one whose CAS held.
				sent[i], stored[i] = in, was
				return in, err
			})
		}
		all := make([]int, len(keys))
		for i := range all {
			all[i] = i
		}
		var err error
		if res, err = update(ctx, all, nil); err != nil {
			return nil, nil, 0, g.threadUnavailable(ctx, err)
		}
		if err := g.restoreThreadsAndRetry(ctx, keys, res, update); err != nil {
			return nil, nil, 0, g.threadUnavailable(ctx, err)
		}
	}
	var (
		recs  []*kgo.Record
		users []string
		gens  []int64
		which []int
		stale []int
	)
	for i, r := range res {
		switch {
		case r.Err == nil:
		case errors.Is(r.Err, errStaleEpoch):
			// In the stale write's place, what Redis holds: the retry of a
			// write whose produce failed turns stale when a mark-unread
			// moved the epoch meanwhile, and it is the last call that can
			// make what Redis took durable.
			stale = append(stale, i)
			continue
		case apierr.ReasonOf(r.Err) != "":
			continue
		default:
			return nil, nil, 0, g.threadUnavailable(ctx, r.Err)
		}
		// Unchanged registers are produced too: a retry of a call whose
		// produce failed after Redis took it finds nothing to change, and
		// only its record carries the acknowledged write to Postgres.
		users, gens, which = append(users, keys[i].User), append(gens, r.Generation), append(which, i)
	}
	for _, i := range stale {
		users, gens = append(users, keys[i].User), append(gens, res[i].Generation)
	}
	g.KnownGenerations(ctx, users, gens)
	for _, h := range heads {
		rec, err := event.EncodeThreadHead(h)
		if err != nil {
			return nil, nil, 0, seam.Internal(err)
		}
		rec.Topic = g.Durable.Topic()
		recs = append(recs, rec)
	}
	for n, i := range which {
		rec, err := event.EncodeThread(sent[i], 0, false)
		if err != nil {
			return nil, nil, 0, seam.Internal(err)
		}
		event.StampGeneration(rec, gens[n])
		rec.Topic = g.Durable.Topic()
		recs = append(recs, rec)
	}
	for n, i := range stale {
		rec, err := event.EncodeThread(res[i].State, 0, false)
		if err != nil {
			return nil, nil, 0, seam.Internal(err)
		}
		event.StampGeneration(rec, gens[len(which)+n])
		rec.Topic = g.Durable.Topic()
		recs = append(recs, rec)
	}
	var before, after []thread.State
	for _, i := range which {
		before, after = append(before, stored[i]), append(after, res[i].State)
	}
	// Watchers see the moves while the records are produced, as the
	// channel write path publishes its view (realtime state, not
	// durability).
	viewed := make(chan struct{})
	go func() {
		defer close(viewed)
		g.readBy.PublishThreadView(ctx, before, after, raised)
	}()
	dur, err := g.Produce(ctx, recs)
	<-viewed
	if err != nil {
		return nil, nil, 0, err
	}
	// New registers may take a user past the bound (threadcollect.go).
	var grew []string
	for _, i := range which {
		if res[i].Changed && stored[i].IsZero() {
			grew = append(grew, keys[i].User)
		}
	}
	g.collectThreadsOf(ctx, grew)
	return res, raised, dur, nil
}

func (g *Threads) threadUnavailable(ctx context.Context, err error) error {
	g.RedisDegradedOn(ctx, seam.RedisOpMerge, 1, err)
	if cerr := seam.ContextError(ctx, err); cerr != nil {
		return cerr
	}
	return seam.UnavailableError(fmt.Errorf("a thread write needs the real-time store: %w; nothing was acknowledged, retry", err), apierr.RetryAfter(g.Cfg.RetryAfter))
}

// MarkThreadRead implements receiptsv1connect.ReceiptServiceHandler.
func (g *Threads) MarkThreadRead(ctx context.Context, req *connect.Request[receiptsv1.MarkThreadReadRequest]) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	r := req.Msg
	k, err := threadKey(r.GetUserId(), r.GetChannelId(), r.GetRootSeq())
	if err != nil {
		return nil, err
	}
	for _, err := range []error{
		seam.Invalid(apierr.InvalidSeq, receipt.ValidateSeq("seq", r.GetSeq())),
		seam.Invalid(apierr.InvalidID, receipt.ValidateOptionalID("message_id", r.GetMessageId())),
		seam.Invalid(apierr.InvalidID, receipt.ValidateOptionalID("device_id", r.GetDeviceId())),
	} {
		if err != nil {
			return nil, err
		}
	}
	if r.Epoch != nil {
		if err := receipt.ValidateEpoch("epoch", r.GetEpoch()); err != nil {
			return nil, seam.Invalid(apierr.InvalidEpoch, err)
		}
	}
	f, head, err := g.checkThreadSeq(ctx, k, r.GetSeq())
	if err != nil {
		return nil, err
	}
	now := g.NowMs()
	res, _, dur, err := g.writeThreads(ctx, []thread.Key{k}, nil, func(_ int, stored thread.State) (thread.State, error) {
		epoch := stored.Cursors.Canonical().ReadEpoch()
		if r.Epoch != nil {
			switch e := r.GetEpoch(); {
			case e > epoch:
				return thread.State{}, seam.Invalid(apierr.EpochAhead, &receipt.FieldError{Field: "epoch", Reason: fmt.Sprintf(
					"%d is ahead of the stored read epoch %d; send an epoch you read (only mark-unread moves it forward)", e, epoch)})
			case e < epoch:
				return thread.State{}, errStaleEpoch
			}
		}
		in := thread.State{Key: k, Cursors: receipt.State{DeviceID: r.GetDeviceId(), UpdatedAtUnixMs: now}}
		pos := receipt.Position{Epoch: epoch, Seq: r.GetSeq()}
		if r.GetPrivate() {
			in.Cursors.PrivateRead = receipt.Cursor{Position: pos}
		} else {
			in.Cursors.Read = receipt.Cursor{Position: pos, MessageID: r.GetMessageId()}
			in.Cursors.Delivered = receipt.Cursor{Position: receipt.Position{Seq: r.GetSeq()}, MessageID: r.GetMessageId()}
		}
		return in, nil
	})
	if err != nil {
		return nil, err
	}
	return g.threadMarkAnswer(ctx, f, k, head, res[0], dur)
}

// threadMarkAnswer is the answer of a write in one thread.
func (g *Threads) threadMarkAnswer(ctx context.Context, f *seam.Facts, k thread.Key, head thread.Head, r threads.StateResult, dur receiptsv1.Durability) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	out := &receiptsv1.ThreadMarkResponse{Durability: dur}
	switch {
	case errors.Is(r.Err, errStaleEpoch):
		// Written: nothing (what went durable in its place changes nothing).
		out.Reason, out.Durability = string(apierr.StaleEpoch), receiptsv1.Durability_DURABILITY_UNSPECIFIED
	case r.Err != nil:
		return nil, r.Err
	default:
		out.Advanced = r.Changed
	}
	reg, _ := f.UserRegister(k.ChannelKey())
	out.Thread = g.ThreadUnread(r.State, head, g.threadCountsOf(ctx, r.State, head), activeFollow(r.State, reg))
	return connect.NewResponse(out), nil
}

// MarkThreadUnread implements receiptsv1connect.ReceiptServiceHandler.
func (g *Threads) MarkThreadUnread(ctx context.Context, req *connect.Request[receiptsv1.MarkThreadUnreadRequest]) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	r := req.Msg
	k, err := threadKey(r.GetUserId(), r.GetChannelId(), r.GetRootSeq())
	if err != nil {
		return nil, err
	}
	if err := receipt.ValidateSeq("seq", r.GetSeq()); err != nil {
		return nil, seam.Invalid(apierr.InvalidSeq, err)
	}
	if err := receipt.ValidateOptionalID("device_id", r.GetDeviceId()); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	if r.Epoch != nil {
		if err := receipt.ValidateEpoch("epoch", r.GetEpoch()); err != nil {
			return nil, seam.Invalid(apierr.InvalidEpoch, err)
		}
	}
	f, head, err := g.checkThreadSeq(ctx, k, r.GetSeq())
	if err != nil {
		return nil, err
	}
	now := g.NowMs()
	var seen int64
	res, _, dur, err := g.writeThreads(ctx, []thread.Key{k}, nil, func(_ int, stored thread.State) (thread.State, error) {
		// Only the private read moves, to the epoch after the one seen:
		// the same call with the same epoch changes nothing twice.
		seen = stored.Cursors.Canonical().ReadEpoch()
		if r.Epoch != nil {
			if e := r.GetEpoch(); e > seen {
				return thread.State{}, seam.Invalid(apierr.EpochAhead, &receipt.FieldError{Field: "epoch", Reason: fmt.Sprintf(
					"%d is ahead of the stored read epoch %d; send an epoch you read (only mark-unread moves it forward)", e, seen)})
			}
			seen = r.GetEpoch()
		}
		if !receipt.CanMarkUnread(seen) {
			return thread.State{}, apierr.New(connect.CodeFailedPrecondition, apierr.EpochLimit, receipt.ErrEpochLimit, apierr.Field("seq"))
		}
		in := thread.MarkUnread(k, r.GetSeq(), seen)
		in.Cursors.DeviceID, in.Cursors.UpdatedAtUnixMs = r.GetDeviceId(), now
		return in, nil
	})
	if err != nil {
		return nil, err
	}
	out, err := g.threadMarkAnswer(ctx, f, k, head, res[0], dur)
	if err == nil {
		out.Msg.Epoch = seen
	}
	return out, err
}

// FollowThread implements receiptsv1connect.ReceiptServiceHandler.
func (g *Threads) FollowThread(ctx context.Context, req *connect.Request[receiptsv1.FollowThreadRequest]) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	return g.follow(ctx, req.Msg, true)
}

// UnfollowThread implements receiptsv1connect.ReceiptServiceHandler.
func (g *Threads) UnfollowThread(ctx context.Context, req *connect.Request[receiptsv1.FollowThreadRequest]) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	return g.follow(ctx, req.Msg, false)
}

func (g *Threads) follow(ctx context.Context, r *receiptsv1.FollowThreadRequest, following bool) (*connect.Response[receiptsv1.ThreadMarkResponse], error) {
	k, err := threadKey(r.GetUserId(), r.GetChannelId(), r.GetRootSeq())
	if err != nil {
		return nil, err
	}
	f, err := g.checkThread(ctx, k)
	if err != nil {
		return nil, err
	}
	heads, err := g.ThreadHeads(ctx, []thread.Ref{k.Ref})
	if err != nil {
		return nil, err
	}
	now := g.NowMs()
	res, _, dur, err := g.writeThreads(ctx, []thread.Key{k}, nil, func(_ int, stored thread.State) (thread.State, error) {
		// A version after the stored one, so the call wins even against
		// a clock that stepped back.
		v := max(now, stored.Follow.VersionUnixMs+1)
		if stored.Follow.Following == following && stored.Follow.VersionUnixMs > 0 {
			v = stored.Follow.VersionUnixMs // already so: a no-op
		}
		return thread.State{Key: k, Follow: thread.Follow{Following: following, VersionUnixMs: v}}, nil
	})
	if err != nil {
		return nil, err
	}
	return g.threadMarkAnswer(ctx, f, k, heads[0], res[0], dur)
}

// activeFollow reports whether a register's follow counts, given the
// user's membership register in the channel (none: the channel tracks no
// membership for the user, so the follow counts as given).
func activeFollow(st thread.State, reg channel.Membership) bool {
	if reg.IsZero() {
		return st.Follow.Following
	}
	return st.Active(reg)
}

// ThreadUnread is a register's counts c at head, in the API's form.
func (g *Threads) ThreadUnread(st thread.State, head thread.Head, c thread.Counts, following bool) *receiptsv1.ThreadUnread {
	return g.fillThreadUnread(&receiptsv1.ThreadUnread{}, make([]receiptsv1.Position, 3), st, head, c, following)
}

// fillThreadUnread is threadUnread into out, its positions in pos[:3].
func (g *Threads) fillThreadUnread(out *receiptsv1.ThreadUnread, pos []receiptsv1.Position, st thread.State, head thread.Head, c thread.Counts, following bool) *receiptsv1.ThreadUnread {
	read := st.Cursors.EffectiveRead()
	pos[0].Seq = head.Seq
	pos[1].Epoch, pos[1].Seq = read.Epoch, read.Seq
	pos[2].Epoch, pos[2].Seq = st.Cursors.Read.Position.Epoch, st.Cursors.Read.Position.Seq
	out.ChannelId, out.RootSeq = st.Key.Channel, st.Key.Root
	out.Head, out.Read, out.PublicRead = &pos[0], &pos[1], &pos[2]
	out.UnreadCount, out.MentionCount, out.MentionsCapped = c.Unread, c.Mentions, c.MentionsCapped
	out.FirstUnreadSeq, out.Following, out.LastActivityUnixMs = c.FirstUnread, following, head.UpdatedAtUnixMs
	return out
}

// ThreadNotice is one validated thread reply notice.
type ThreadNotice struct {
	seam.Notice
	root int64
}

func ValidateThreadNotice(prefix string, n *receiptsv1.MessageNotice) (ThreadNotice, error) {
	v, err := seam.ValidateNotice(prefix, n)
	if err != nil {
		return ThreadNotice{}, err
	}
	if err := receipt.ValidateSeq(prefix+"thread_root_seq", n.GetThreadRootSeq()); err != nil {
		return ThreadNotice{}, seam.Invalid(apierr.InvalidSeq, err)
	}
	return ThreadNotice{Notice: v, root: n.GetThreadRootSeq()}, nil
}

// NotifyThreadReply implements receiptsv1connect.ReceiptServiceHandler.
func (g *Threads) NotifyThreadReply(ctx context.Context, req *connect.Request[receiptsv1.NotifyThreadReplyRequest]) (*connect.Response[receiptsv1.NotifyThreadReplyResponse], error) {
	r := req.Msg
	n, err := ValidateThreadNotice("", &receiptsv1.MessageNotice{ChannelId: r.GetChannelId(), Seq: r.GetSeq(), MessageId: r.GetMessageId(),
		SenderId: r.GetSenderId(), Mentions: r.GetMentions(), ThreadRootSeq: r.GetRootSeq()})
	if err != nil {
		if _, rerr := ThreadRef(r.GetChannelId(), r.GetRootSeq()); rerr != nil {
			return nil, rerr // named root_seq, as the route names it
		}
		return nil, err
	}
	results, err := g.NotifyThreads(ctx, []ThreadNotice{n})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.NotifyThreadReplyResponse{Result: results[0]}), nil
}

// NotifyThreads runs the write path of thread reply notices: each raises
// its thread's head and the sender's thread read cursor to its seq, makes
// the sender and each mentioned member follow the thread, and adds the
// seq to the mentioned members' thread mentions. The roots must be at or
// below their channels' heads. Mentions of non-members are dropped.
func (g *Threads) NotifyThreads(ctx context.Context, notices []ThreadNotice) ([]*receiptsv1.NoticeResult, error) {
	cost := 0
	var keys []receipt.Key
	for _, n := range notices {
		cost += len(n.Mentions)
		keys = append(keys, receipt.Key{User: n.Sender, Channel: n.Channel})
		for _, u := range n.Mentions {
			keys = append(keys, receipt.Key{User: u, Channel: n.Channel})
		}
	}
	if err := seam.Charge(ctx, cost); err != nil {
		return nil, err
	}
	f := g.Lookup(ctx, keys, true)
	if !f.Known {
		return nil, seam.UnavailableError(errors.New("a thread notice needs the real-time store; nothing was written, retry"), apierr.RetryAfter(g.Cfg.RetryAfter))
	}
	now := g.NowMs()
	results := make([]*receiptsv1.NoticeResult, len(notices))
	heads := make([]thread.Head, len(notices))
	idx := map[thread.Key]int{}
	var (
		tkeys []thread.Key
		parts [][]thread.State // what each key receives, merged in incoming
	)
	add := func(st thread.State) {
		i, ok := idx[st.Key]
		if !ok {
			i = len(tkeys)
			idx[st.Key] = i
			tkeys, parts = append(tkeys, st.Key), append(parts, nil)
		}
		parts[i] = append(parts[i], st)
	}
	prefix := func(i int) string {
		if len(notices) == 1 {
			return ""
		}
		return "notices[" + strconv.Itoa(i) + "]."
	}
	for i, n := range notices {
		ref := thread.Ref{Channel: n.Channel, Root: n.root}
		if head := f.Head(n.Channel); n.root > head {
			return nil, seam.HeadBehind(prefix(i)+"thread_root_seq", n.root, head)
		}
		heads[i] = thread.Head{Ref: ref, Seq: n.Seq, MessageID: n.MessageID, UpdatedAtUnixMs: now}
		res := &receiptsv1.NoticeResult{}
		results[i] = res
		follow := thread.Follow{Following: true, VersionUnixMs: now}
		if n.Sender != "" {
			st := thread.State{Key: thread.Key{User: n.Sender, Ref: ref}, Cursors: receipt.State{
				Read:            receipt.Cursor{Position: receipt.Position{Epoch: receipt.EpochCurrent, Seq: n.Seq}, MessageID: n.MessageID},
				Delivered:       receipt.Cursor{Position: receipt.Position{Seq: n.Seq}, MessageID: n.MessageID},
				UpdatedAtUnixMs: now,
			}}
			if member, registered := f.Member(receipt.Key{User: n.Sender, Channel: n.Channel}); !registered || member {
				st.Follow = follow
			}
			add(st)
		}
		for _, u := range n.Mentions {
			if member, registered := f.Member(receipt.Key{User: u, Channel: n.Channel}); registered && !member {
				res.MentionsDropped = append(res.MentionsDropped, u)
				continue
			}
			res.Mentioned = append(res.Mentioned, u)
			add(thread.State{Key: thread.Key{User: u, Ref: ref}, Follow: follow, Mentions: []int64{n.Seq}})
		}
	}
	_, raised, dur, err := g.writeThreads(ctx, tkeys, heads, func(i int, stored thread.State) (thread.State, error) {
		var in thread.State
		epoch := stored.Cursors.Canonical().ReadEpoch()
		for _, p := range parts[i] {
			if p.Cursors.Read.Position.Epoch == receipt.EpochCurrent {
				p.Cursors.Read.Position.Epoch = epoch // sending implies having read, at the current epoch
			}
			in, _ = thread.Merge(in, p, math.MaxInt32)
		}
		in.Key = tkeys[i]
		in.Mentions = lastN(in.Mentions, g.Cfg.MentionCap+1)
		return in, nil
	})
	if err != nil {
		return nil, err
	}
	for i, res := range results {
		res.Durability = dur
		h := raised[i]
		res.Head = event.CursorToProto(receipt.Cursor{Position: receipt.Position{Seq: h.Head.Seq}, MessageID: h.Head.MessageID})
		res.Advanced = h.Advanced
	}
	return results, nil
}

// lastN keeps the last n of sorted seqs.
func lastN(seqs []int64, n int) []int64 {
	if len(seqs) > n {
		return seqs[len(seqs)-n:]
	}
	return seqs
}

// ThreadStore is the thread registers' storage on the gate's stores,
// keeping the configured mention cap's.
func (g *registers) ThreadStore() threads.Store {
	return threads.NewStore(g.PG, g.Redis).WithMentionCap(g.Cfg.MentionCap)
}
