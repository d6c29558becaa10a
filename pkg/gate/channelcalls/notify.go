package channelcalls

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/markcalls"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/gate/threadcalls"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	channelheads "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/receipt"
)

// Bounds of the notice calls.
const (
	// MaxNotices bounds the notices of one NotifyMessages call.
	MaxNotices = 500
)

// NotifyMessage implements receiptsv1connect.ReceiptServiceHandler.
func (g *Channels) NotifyMessage(ctx context.Context, req *connect.Request[receiptsv1.NotifyMessageRequest]) (*connect.Response[receiptsv1.NotifyMessageResponse], error) {
	r := req.Msg
	n, err := seam.ValidateNotice("", &receiptsv1.MessageNotice{ChannelId: r.GetChannelId(), Seq: r.GetSeq(), MessageId: r.GetMessageId(),
		SenderId: r.GetSenderId(), Mentions: r.GetMentions(), MentionAll: r.GetMentionAll()})
	if err != nil {
		return nil, err
	}
	results, err := g.notify(ctx, []seam.Notice{n})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.NotifyMessageResponse{Result: results[0]}), nil
}

// NotifyMessages implements receiptsv1connect.ReceiptServiceHandler.
func (g *Channels) NotifyMessages(ctx context.Context, req *connect.Request[receiptsv1.NotifyMessagesRequest]) (*connect.Response[receiptsv1.NotifyMessagesResponse], error) {
	ns := req.Msg.GetNotices()
	switch {
	case len(ns) == 0:
		return nil, seam.Invalid(apierr.EmptyRequest, &receipt.FieldError{Field: "notices", Reason: "must not be empty"})
	case len(ns) > MaxNotices:
		return nil, seam.TooMany("notices", fmt.Sprintf("has %d items", len(ns)), MaxNotices)
	}
	// Thread replies (a thread_root_seq) take the thread path, deletes
	// (deleted) the deletion path; the results keep the request's order.
	var (
		notices                          []seam.Notice
		threads                          []threadcalls.ThreadNotice
		dels                             []deletion
		channelIdx, threadIdx, deleteIdx []int
	)
	for i, n := range ns {
		prefix := "notices[" + strconv.Itoa(i) + "]."
		if n.GetDeleted() {
			v, err := validateDeletion(prefix, n)
			if err != nil {
				return nil, err
			}
			dels, deleteIdx = append(dels, v), append(deleteIdx, i)
			continue
		}
		if n.GetThreadRootSeq() != 0 {
			v, err := threadcalls.ValidateThreadNotice(prefix, n)
			if err != nil {
				return nil, err
			}
			if v.MentionAll {
				return nil, seam.Invalid(apierr.InvalidField, &receipt.FieldError{Field: prefix + "mention_all", Reason: "is not for thread replies"})
			}
			threads, threadIdx = append(threads, v), append(threadIdx, i)
			continue
		}
		v, err := seam.ValidateNotice(prefix, n)
		if err != nil {
			return nil, err
		}
		notices, channelIdx = append(notices, v), append(channelIdx, i)
	}
	results := make([]*receiptsv1.NoticeResult, len(ns))
	if len(notices) > 0 {
		res, err := g.notify(ctx, notices)
		if err != nil {
			return nil, err
		}
		for j, i := range channelIdx {
			results[i] = res[j]
		}
	}
	if len(threads) > 0 {
		res, err := g.threads.NotifyThreads(ctx, threads)
		if err != nil {
			return nil, err
		}
		for j, i := range threadIdx {
			results[i] = res[j]
		}
	}
	if len(dels) > 0 {
		durability, degraded, err := g.deleteMessages(ctx, dels)
		if err != nil {
			return nil, err
		}
		for _, i := range deleteIdx {
			results[i] = &receiptsv1.NoticeResult{Durability: durability, RealtimeDegraded: degraded}
		}
	}
	return connect.NewResponse(&receiptsv1.NotifyMessagesResponse{Results: results}), nil
}

// notify runs the write path of validated notices: each raises its
// channel's head, the sender's read cursor (sending implies having read,
// at the current epoch) and adds its seq to the mention set of each
// mentioned member. Mentions of users who are not members of a channel
// with registered members are dropped (a channel without any register
// does not track membership, so its mentions are kept). Redis first, then
// every record is made durable before the answer.
func (g *Channels) notify(ctx context.Context, notices []seam.Notice) ([]*receiptsv1.NoticeResult, error) {
	// Each mention is a write of its own (the member's mention set): the
	// caller is charged for them beyond the one event per notice.
	cost := 0
	for _, n := range notices {
		cost += len(n.Mentions)
	}
	groups := groupMentionsOf(notices, g.Cfg.MentionCap)
	cost += len(groups)
	if err := seam.Charge(ctx, cost); err != nil {
		return nil, err
	}
	now := g.NowMs()
	var mentionKeys []receipt.Key
	for _, n := range notices {
		for _, u := range n.Mentions {
			mentionKeys = append(mentionKeys, receipt.Key{User: u, Channel: n.Channel})
		}
	}
	f := g.Lookup(ctx, mentionKeys, false)

	results := make([]*receiptsv1.NoticeResult, len(notices))
	heads := make([]channel.Head, len(notices))
	var (
		senders   []receipt.State
		senderOf  = make([]int, len(notices)) // index into senders, or -1
		mentioned = map[receipt.Key][]int64{}
		keyOrder  []receipt.Key
	)
	for i, n := range notices {
		heads[i] = channel.Head{Channel: n.Channel, Seq: n.Seq, MessageID: n.MessageID, UpdatedAtUnixMs: now}
		senderOf[i] = -1
		if n.Sender != "" {
			senderOf[i] = len(senders)
			c := receipt.Cursor{Position: receipt.Position{Epoch: receipt.EpochCurrent, Seq: n.Seq}, MessageID: n.MessageID}
			senders = append(senders, receipt.State{Key: receipt.Key{User: n.Sender, Channel: n.Channel}, Read: c,
				Delivered: receipt.Cursor{Position: receipt.Position{Seq: n.Seq}, MessageID: n.MessageID}, UpdatedAtUnixMs: now})
		}
		res := &receiptsv1.NoticeResult{}
		for _, u := range n.Mentions {
			k := receipt.Key{User: u, Channel: n.Channel}
			if member, registered := f.Member(k); f.Known && registered && !member {
				res.MentionsDropped = append(res.MentionsDropped, u)
				continue
			}
			res.Mentioned = append(res.Mentioned, u)
			if _, ok := mentioned[k]; !ok {
				keyOrder = append(keyOrder, k)
			}
			mentioned[k] = append(mentioned[k], n.Seq)
		}
		results[i] = res
	}
	var mentions []channel.Mentions
	for _, k := range keyOrder {
		seqs := slices.Compact(slices.Sorted(slices.Values(mentioned[k])))
		for len(seqs) > 0 { // one event carries at most MaxMentionSeqs
			part := seqs[:min(len(seqs), channel.MaxMentionSeqs)]
			mentions = append(mentions, channel.Mentions{Key: k, Seqs: part})
			seqs = seqs[len(part):]
		}
	}

	// The records' sizes do not depend on what Redis answers: check the
	// spool's room with provisional ones before touching Redis.
	recs, err := g.noticeRecords(heads, senders, mentions, groups, nil)
	if err != nil {
		return nil, err
	}
	if err := g.Durable.Refuse(recs); err != nil {
		return nil, g.Unavailable(ctx, len(recs), err)
	}

	var (
		wg          sync.WaitGroup
		raised      []channelheads.Result
		merged      []cursors.MergeResult
		mentionGens []int64
		mentionErr  error
		groupErr    error
	)
	wg.Go(func() { raised = g.raiseHeads(ctx, heads) })
	if len(senders) > 0 {
		wg.Go(func() { merged = g.marks.MergeRedis(ctx, senders) })
	}
	if len(mentions) > 0 {
		wg.Go(func() {
			if mentionGens, mentionErr = g.MentionStore().AddRedisReadingGenerations(ctx, mentions); mentionErr != nil {
				g.RedisDegradedOn(ctx, seam.RedisOpMerge, 1, mentionErr)
			}
		})
	}
	if len(groups) > 0 {
		wg.Go(func() { groupErr = g.addGroupMentions(ctx, groups) })
	}
	wg.Wait()
	resolved, err := g.marks.ResolveEpochs(ctx, senders, merged)
	if err != nil {
		return nil, err
	}
	g.marks.MergeUnloaded(ctx, merged, resolved)
	// Each sender's read and mention set is stamped with the generation
	// its script read in the user's slot (the mention kind's hash lives
	// beside the user's tombstone), as marks are.
	gens := make([]int64, 0, len(senders)+len(mentions))
	users := make([]string, 0, cap(gens))
	for i, s := range senders {
		gens = append(gens, seam.GenerationOf(merged[i].Generation, merged[i].Err))
		users = append(users, s.Key.User)
	}
	for i, m := range mentions {
		gen := event.Unstamped
		if mentionErr == nil {
			gen = mentionGens[i]
		}
		gens = append(gens, gen)
		users = append(users, m.Key.User)
	}
	g.KnownGenerations(ctx, users, gens)
	if recs, err = g.noticeRecords(heads, resolved, mentions, groups, gens); err != nil {
		return nil, err
	}
	durability, err := g.Produce(ctx, recs)
	if err != nil {
		return nil, err
	}
	g.Restore.NoteDegraded(markcalls.DegradedUsers(senders, merged))
	for i, res := range results {
		res.Durability = durability
		h := raised[i]
		if h.Err != nil {
			res.RealtimeDegraded = true
			res.Head = event.CursorToProto(receipt.Cursor{Position: receipt.Position{Seq: heads[i].Seq}, MessageID: heads[i].MessageID})
		} else {
			res.Head = event.CursorToProto(receipt.Cursor{Position: receipt.Position{Seq: h.Head.Seq}, MessageID: h.Head.MessageID})
			res.Advanced = h.Advanced
		}
		if j := senderOf[i]; j >= 0 && merged[j].Err != nil {
			res.RealtimeDegraded = true
		}
		if mentionErr != nil && len(res.Mentioned) > 0 {
			res.RealtimeDegraded = true
		}
		if groupErr != nil && notices[i].MentionAll {
			res.RealtimeDegraded = true
		}
	}
	return results, nil
}

// raiseHeads raises heads in Redis; it always returns one result per head.
func (g *Channels) raiseHeads(ctx context.Context, heads []channel.Head) []channelheads.Result {
	out, err := g.HeadStore().RaiseRedis(ctx, heads)
	if len(out) != len(heads) {
		out = make([]channelheads.Result, len(heads))
		for i := range out {
			out[i].Err = err
		}
	}
	failed := 0
	for _, r := range out {
		if r.Err != nil {
			failed++
			err = r.Err
		}
	}
	if failed > 0 {
		g.RedisDegradedOn(ctx, seam.RedisOpMerge, failed, err)
	}
	return out
}

// noticeRecords builds the records of a notice call: one channel event
// per channel (its greatest head: the others would change nothing), one
// user event per sender's read and one per mention set, these stamped
// with gens (senders', then mentions'; nil: the longest stamp, for
// sizing).
func (g *Channels) noticeRecords(heads []channel.Head, senders []receipt.State, mentions []channel.Mentions, groups []channel.GroupMentions, gens []int64) ([]*kgo.Record, error) {
	top := map[string]channel.Head{}
	var order []string
	for _, h := range heads {
		cur, ok := top[h.Channel]
		if !ok {
			order = append(order, h.Channel)
		}
		top[h.Channel], _ = channel.MergeHead(cur, h)
	}
	recs := make([]*kgo.Record, 0, len(order)+len(senders)+len(mentions))
	add := func(rec *kgo.Record, err error) error {
		if err != nil {
			return seam.Internal(err)
		}
		rec.Topic = g.Durable.Topic()
		recs = append(recs, rec)
		return nil
	}
	stamp := func(i int) {
		gen := int64(math.MaxInt64)
		if gens != nil {
			gen = gens[i]
		}
		event.StampGeneration(recs[len(recs)-1], gen)
	}
	for _, ch := range order {
		if err := add(event.EncodeHead(top[ch])); err != nil {
			return nil, err
		}
	}
	if err := groupMentionRecords(top, groups, add); err != nil {
		return nil, err
	}
	for i, s := range senders {
		if err := add(event.Encode(s)); err != nil {
			return nil, err
		}
		stamp(i)
	}
	for i, m := range mentions {
		// The notice's time, which an erasure's rule for unstamped events
		// compares.
		if err := add(event.EncodeDecoded(event.Decoded{Key: m.Key, Mentions: m.Seqs, AcceptedAtUnixMs: top[m.Key.Channel].UpdatedAtUnixMs})); err != nil {
			return nil, err
		}
		stamp(len(senders) + i)
	}
	return recs, nil
}
