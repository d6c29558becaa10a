package gate

import (
	"context"
	"slices"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
)

// DeleteMessage implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) DeleteMessage(ctx context.Context, req *connect.Request[receiptsv1.DeleteMessageRequest]) (*connect.Response[receiptsv1.DeleteMessageResponse], error) {
	r := req.Msg
	if err := receipt.ValidateID("channel_id", r.GetChannelId()); err != nil {
		return nil, invalid(apierr.InvalidID, err)
	}
	if err := receipt.ValidateSeq("seq", r.GetSeq()); err != nil {
		return nil, invalid(apierr.InvalidSeq, err)
	}
	durability, degraded, err := g.deleteMessages(ctx, []deletion{{channel: r.GetChannelId(), seq: r.GetSeq()}})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&receiptsv1.DeleteMessageResponse{Durability: durability, RealtimeDegraded: degraded}), nil
}

// deletion is one validated delete.
type deletion struct {
	channel string
	seq     int64
}

// validateDeletion checks a notice that deletes: a channel and a seq,
// nothing that only announcing carries.
func validateDeletion(prefix string, n *receiptsv1.MessageNotice) (deletion, error) {
	if err := receipt.ValidateID(prefix+"channel_id", n.GetChannelId()); err != nil {
		return deletion{}, invalid(apierr.InvalidID, err)
	}
	if err := receipt.ValidateSeq(prefix+"seq", n.GetSeq()); err != nil {
		return deletion{}, invalid(apierr.InvalidSeq, err)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"message_id", n.GetMessageId() != ""}, {"sender_id", n.GetSenderId() != ""}, {"mentions", len(n.GetMentions()) > 0},
		{"thread_root_seq", n.GetThreadRootSeq() != 0}} {
		if f.set {
			return deletion{}, invalid(apierr.InvalidField, &receipt.FieldError{Field: prefix + f.name, Reason: "must be empty when deleted is set"})
		}
	}
	return deletion{channel: n.GetChannelId(), seq: n.GetSeq()}, nil
}

// deleteMessages adds the seqs to their channels' deletion sets: Redis
// first, then one channel event per channel (per MaxDeletedSeqs) made
// durable before the answer. degraded: Redis did not take them (the
// persister will, from the events).
func (g *Gate) deleteMessages(ctx context.Context, dels []deletion) (receiptsv1.Durability, bool, error) {
	now := g.nowMs()
	byCh := map[string][]int64{}
	var order []string
	for _, d := range dels {
		if _, ok := byCh[d.channel]; !ok {
			order = append(order, d.channel)
		}
		byCh[d.channel] = append(byCh[d.channel], d.seq)
	}
	var sets []channel.Deletions
	for _, ch := range order {
		seqs := slices.Compact(slices.Sorted(slices.Values(byCh[ch])))
		for len(seqs) > 0 {
			part := seqs[:min(len(seqs), channel.MaxDeletedSeqs)]
			sets = append(sets, channel.Deletions{Channel: ch, Seqs: part, UpdatedAtUnixMs: now})
			seqs = seqs[len(part):]
		}
	}
	recs := make([]*kgo.Record, len(sets))
	for i := range sets {
		rec, err := event.EncodeDecoded(event.Decoded{Deletions: &sets[i]})
		if err != nil {
			return 0, false, internal(err)
		}
		rec.Topic = g.durable.Topic()
		recs[i] = rec
	}
	if err := g.durable.Refuse(recs); err != nil {
		return 0, false, g.unavailable(len(recs), err)
	}
	rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	errs, err := g.redis.AddDeletions(rctx, sets)
	cancel()
	degraded := err != nil
	for _, e := range errs {
		if e != nil {
			degraded, err = true, e
		}
	}
	if degraded {
		g.m.redisDegraded.WithLabelValues(redisOpMerge).Inc()
		g.warnRedis(redisOpMerge, err)
	}
	durability, err := g.produce(ctx, recs)
	if err != nil {
		return 0, false, err
	}
	return durability, degraded, nil
}
