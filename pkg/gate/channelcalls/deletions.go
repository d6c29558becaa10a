package channelcalls

import (
	"context"
	"slices"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/gate/threadcalls"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// DeleteMessage implements receiptsv1connect.ReceiptServiceHandler.
func (g *Channels) DeleteMessage(ctx context.Context, req *connect.Request[receiptsv1.DeleteMessageRequest]) (*connect.Response[receiptsv1.DeleteMessageResponse], error) {
	r := req.Msg
	if err := receipt.ValidateID("channel_id", r.GetChannelId()); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	if err := receipt.ValidateSeq("seq", r.GetSeq()); err != nil {
		return nil, seam.Invalid(apierr.InvalidSeq, err)
	}
	durability, degraded, err := g.deleteMessages(ctx, []deletion{{ref: thread.Ref{Channel: r.GetChannelId()}, seq: r.GetSeq(), field: "seq"}})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.DeleteMessageResponse{Durability: durability, RealtimeDegraded: degraded}), nil
}

// DeleteThreadReply implements receiptsv1connect.ReceiptServiceHandler.
// The root is not checked against the channel's head: a delete may come
// before the notices it follows, as a channel message's may.
func (g *Channels) DeleteThreadReply(ctx context.Context, req *connect.Request[receiptsv1.DeleteThreadReplyRequest]) (*connect.Response[receiptsv1.DeleteMessageResponse], error) {
	r := req.Msg
	ref, err := threadcalls.ThreadRef(r.GetChannelId(), r.GetRootSeq())
	if err != nil {
		return nil, err
	}
	if err := receipt.ValidateSeq("seq", r.GetSeq()); err != nil {
		return nil, seam.Invalid(apierr.InvalidSeq, err)
	}
	durability, degraded, err := g.deleteMessages(ctx, []deletion{{ref: ref, seq: r.GetSeq(), field: "seq"}})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.DeleteMessageResponse{Durability: durability, RealtimeDegraded: degraded}), nil
}

// deletion is one validated delete: of a channel message (ref.Root 0) or
// a thread reply.
type deletion struct {
	ref   thread.Ref
	seq   int64
	field string // the seq's, in the request's terms
}

// validateDeletion checks a notice that deletes: a channel and a seq (a
// reply's with a thread_root_seq), nothing that only announcing carries.
func validateDeletion(prefix string, n *receiptsv1.MessageNotice) (deletion, error) {
	if err := receipt.ValidateID(prefix+"channel_id", n.GetChannelId()); err != nil {
		return deletion{}, seam.Invalid(apierr.InvalidID, err)
	}
	if err := receipt.ValidateSeq(prefix+"seq", n.GetSeq()); err != nil {
		return deletion{}, seam.Invalid(apierr.InvalidSeq, err)
	}
	if n.GetThreadRootSeq() != 0 {
		if err := receipt.ValidateSeq(prefix+"thread_root_seq", n.GetThreadRootSeq()); err != nil {
			return deletion{}, seam.Invalid(apierr.InvalidSeq, err)
		}
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"message_id", n.GetMessageId() != ""}, {"sender_id", n.GetSenderId() != ""}, {"mentions", len(n.GetMentions()) > 0}} {
		if f.set {
			return deletion{}, seam.Invalid(apierr.InvalidField, &receipt.FieldError{Field: prefix + f.name, Reason: "must be empty when deleted is set"})
		}
	}
	return deletion{ref: thread.Ref{Channel: n.GetChannelId(), Root: n.GetThreadRootSeq()}, seq: n.GetSeq(), field: prefix + "seq"}, nil
}

// checkDeletionLeads refuses a deletion beyond its channel's (or
// thread's) head by the kind's bound (deletions.CheckLead).
func (g *Channels) checkDeletionLeads(ctx context.Context, dels []deletion) error {
	var chans []string
	var threads []thread.Ref
	seen := map[thread.Ref]bool{}
	for _, d := range dels {
		if seen[d.ref] {
			continue
		}
		seen[d.ref] = true
		if d.ref.Root == 0 {
			chans = append(chans, d.ref.Channel)
		} else {
			threads = append(threads, d.ref)
		}
	}
	heads := make(map[thread.Ref]int64, len(seen))
	if len(chans) > 0 {
		known, err := g.HeadStore().ReadRedis(ctx, chans)
		if err != nil {
			g.WarnRedis(ctx, seam.RedisOpGet, err)
			known = nil
		}
		for _, ch := range chans {
			h, ok := known[ch]
			if !ok {
				durable, err := g.readBy.ChannelHead(ctx, ch)
				if err != nil {
					if cerr := seam.ContextError(ctx, err); cerr != nil {
						return cerr
					}
					return seam.UnavailableError(err, apierr.RetryAfter(g.Cfg.RetryAfter))
				}
				if durable != nil {
					h = *durable
				}
			}
			heads[thread.Ref{Channel: ch}] = h.Seq
		}
	}
	if len(threads) > 0 {
		ths, err := g.threads.ThreadHeads(ctx, threads)
		if err != nil {
			return err
		}
		for i, h := range ths {
			heads[threads[i]] = h.Seq
		}
	}
	for _, d := range dels {
		head := heads[d.ref]
		if fe := deletions.CheckLead(d.field, d.seq, head); fe != nil {
			return seam.Invalid(apierr.DeletionBeyondHead, fe, apierr.Head(head), apierr.Limit(channel.DeletionLead))
		}
	}
	return nil
}

// deleteMessages checks the seqs against their heads, then adds them to their deletion sets (a channel's or a
// thread's): Redis first, then one channel event per set (per
// MaxDeletedSeqs) made durable before the answer. degraded: Redis did not take them (the
// persister will, from the events).
func (g *Channels) deleteMessages(ctx context.Context, dels []deletion) (receiptsv1.Durability, bool, error) {
	if err := g.checkDeletionLeads(ctx, dels); err != nil {
		return 0, false, err
	}
	now := g.NowMs()
	bySet := map[thread.Ref][]int64{}
	var order []thread.Ref
	for _, d := range dels {
		if _, ok := bySet[d.ref]; !ok {
			order = append(order, d.ref)
		}
		bySet[d.ref] = append(bySet[d.ref], d.seq)
	}
	var sets []channel.Deletions
	for _, ref := range order {
		seqs := slices.Compact(slices.Sorted(slices.Values(bySet[ref])))
		for len(seqs) > 0 {
			part := seqs[:min(len(seqs), channel.MaxDeletedSeqs)]
			sets = append(sets, channel.Deletions{Channel: ref.Channel, Root: ref.Root, Seqs: part, UpdatedAtUnixMs: now})
			seqs = seqs[len(part):]
		}
	}
	recs := make([]*kgo.Record, len(sets))
	for i := range sets {
		rec, err := event.EncodeDecoded(event.Decoded{Deletions: &sets[i]})
		if err != nil {
			return 0, false, seam.Internal(err)
		}
		rec.Topic = g.Durable.Topic()
		recs[i] = rec
	}
	if err := g.Durable.Refuse(recs); err != nil {
		return 0, false, g.Unavailable(ctx, len(recs), err)
	}
	errs, err := g.DeletionStore().AddRedis(ctx, sets)
	degraded := err != nil
	for _, e := range errs {
		if e != nil {
			degraded, err = true, e
		}
	}
	if degraded {
		g.RedisDegradedOn(ctx, seam.RedisOpMerge, 1, err)
	}
	durability, err := g.Produce(ctx, recs)
	if err != nil {
		return 0, false, err
	}
	return durability, degraded, nil
}
