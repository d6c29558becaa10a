package event

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// Thread events are the channel's events with a thread root (schema
// version 4): a user's thread register travels as a ReceiptEvent keyed
// by the user's (user, channel), so it shares the partition, and the order,
// of the user's channel events; a thread's head as a ChannelEvent keyed by
// the channel.

// EncodeThread builds the user event of a thread register.
func EncodeThread(st thread.State, gen int64, stamped bool) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{Key: st.Key.ChannelKey(), Thread: &st, Generation: gen, Stamped: stamped})
}

// EncodeThreadHead builds the channel event of a thread head.
func EncodeThreadHead(h thread.Head) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{ThreadHead: &h})
}

func encodeThread(d Decoded) (*kgo.Record, error) {
	var (
		msg proto.Message
		key string
	)
	if h := d.ThreadHead; h != nil {
		key = receipt.EscapeKeyID(h.Channel)
		msg = &recordv1.ChannelEvent{
			SchemaVersion:    ThreadSchemaVersion,
			ChannelId:        h.Channel,
			ThreadRootSeq:    h.Root,
			Head:             recordCursor(receipt.Cursor{Position: receipt.Position{Seq: h.Seq}, MessageID: h.MessageID}),
			AcceptedAtUnixMs: h.UpdatedAtUnixMs,
		}
	} else {
		st := d.Thread
		cur := st.Cursors
		cur.Key = st.Key.ChannelKey()
		ev := UserEventToProto(Decoded{Key: cur.Key, Receipt: &cur, Generation: d.Generation, Stamped: d.Stamped})
		if ev.Read == nil && ev.Delivered == nil && ev.PrivateRead == nil {
			ev.AcceptedAtUnixMs = st.Time()
		}
		ev.SchemaVersion = ThreadSchemaVersion
		ev.ThreadRootSeq = st.Key.Root
		ev.MentionSeqs = st.Mentions
		if st.Follow != (thread.Follow{}) {
			ev.Follow = &recordv1.ThreadFollow{Following: st.Follow.Following, VersionUnixMs: st.Follow.VersionUnixMs}
		}
		key = cur.Key.KafkaKey()
		msg = ev
	}
	v, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("marshalling thread event %s: %w", key, err)
	}
	return typed(&kgo.Record{Key: []byte(key), Value: v}), nil
}

func decodeThreadUser(r *kgo.Record, ev *recordv1.ReceiptEvent) (Decoded, error) {
	if ev.GetSchemaVersion() < ThreadSchemaVersion {
		return Decoded{}, fmt.Errorf("%w: a thread event of schema version %d", ErrUndecodable, ev.GetSchemaVersion())
	}
	if ev.GetMembership() != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: a thread event carries no membership", ErrUndecodable)
	}
	cur := FromProto(ev)
	st := thread.State{
		Key:      thread.Key{User: cur.Key.User, Ref: thread.Ref{Channel: cur.Key.Channel, Root: ev.GetThreadRootSeq()}},
		Mentions: ev.GetMentionSeqs(),
	}
	if f := ev.GetFollow(); f != nil {
		st.Follow = thread.Follow{Following: f.GetFollowing(), VersionUnixMs: f.GetVersionUnixMs()}
	}
	hasCursor := !cur.Read.Position.IsZero() || !cur.Delivered.Position.IsZero() || !cur.PrivateRead.Position.IsZero()
	if hasCursor {
		cur.Key = receipt.Key{}
		st.Cursors = cur
	}
	d := Decoded{Key: st.Key.ChannelKey(), Thread: &st, Generation: ev.GetUserGeneration(),
		Stamped: stamped(ev.GetUserGenerationStamped(), ev.GetUserGeneration())}
	if !hasCursor {
		d.AcceptedAtUnixMs = ev.GetAcceptedAtUnixMs()
	}
	if err := validateStamp(d.Generation, d.AcceptedAtUnixMs); err != nil {
		return Decoded{}, err
	}
	if !hasCursor && st.Follow == (thread.Follow{}) && len(st.Mentions) == 0 {
		return Decoded{}, fmt.Errorf("%w: invalid event: a thread event carries no cursor, follow or mention", ErrUndecodable)
	}
	if err := st.Validate(); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if err := receipt.ValidateOptionalID("device_id", ev.GetDeviceId()); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if !matchesKey(r.Key, d.Key.KafkaKey(), d.Key.LegacyKafkaKey()) {
		return Decoded{}, fmt.Errorf("%w: record key %q does not match event key %q", ErrUndecodable, r.Key, d.Key.KafkaKey())
	}
	return d, nil
}

func decodeThreadHead(r *kgo.Record, ev *recordv1.ChannelEvent) (Decoded, error) {
	if ev.GetSchemaVersion() < ThreadSchemaVersion {
		return Decoded{}, fmt.Errorf("%w: a thread event of schema version %d", ErrUndecodable, ev.GetSchemaVersion())
	}
	if ev.GetHead().GetPosition().GetEpoch() != 0 {
		return Decoded{}, fmt.Errorf("%w: invalid event: a head has no epoch", ErrUndecodable)
	}
	h := thread.Head{
		Ref:             thread.Ref{Channel: ev.GetChannelId(), Root: ev.GetThreadRootSeq()},
		Seq:             ev.GetHead().GetPosition().GetSeq(),
		MessageID:       ev.GetHead().GetMessageId(),
		UpdatedAtUnixMs: ev.GetAcceptedAtUnixMs(),
	}
	if err := h.Validate(); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if !matchesKey(r.Key, receipt.EscapeKeyID(h.Channel), "") {
		return Decoded{}, fmt.Errorf("%w: record key %q does not match channel %q", ErrUndecodable, r.Key, h.Channel)
	}
	return Decoded{ThreadHead: &h}, nil
}
