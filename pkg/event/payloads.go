package event

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// The payloads of the kinds this package always decoded (cursors,
// mentions, membership, notification registers, heads, group mentions,
// deletions, settings, erasures, thread registers and heads) are encoded
// and decoded here, into Decoded's fields, so that their callers read an
// envelope record as they read the earlier messages; each is checked by
// the same code as the earlier message of the same content (the checks
// both share, or the earlier decoder handed the message the payloads
// make). This set is closed: a kind added
// later has a payload type of its own, which this package keeps as
// Decoded.Payloads for the kind to decode (kind.Spec's Payload).

// Payload types, short.
const (
	ptCursors       = recordv1.PayloadType_PAYLOAD_TYPE_CURSORS
	ptMentions      = recordv1.PayloadType_PAYLOAD_TYPE_MENTION_SEQS
	ptMembership    = recordv1.PayloadType_PAYLOAD_TYPE_MEMBERSHIP
	ptNotifications = recordv1.PayloadType_PAYLOAD_TYPE_NOTIFICATION_REGISTER
	ptHead          = recordv1.PayloadType_PAYLOAD_TYPE_HEAD
	ptGroupMentions = recordv1.PayloadType_PAYLOAD_TYPE_GROUP_MENTIONS
	ptDeletions     = recordv1.PayloadType_PAYLOAD_TYPE_DELETIONS
	ptSettings      = recordv1.PayloadType_PAYLOAD_TYPE_SETTINGS
	ptErasure       = recordv1.PayloadType_PAYLOAD_TYPE_ERASURE
	ptThread        = recordv1.PayloadType_PAYLOAD_TYPE_THREAD_REGISTER
	ptThreadHead    = recordv1.PayloadType_PAYLOAD_TYPE_THREAD_HEAD
)

// shape is the set of built-in payload types that may share a record.
type shape int

const (
	shapeNone        shape = iota
	shapeUserChannel       // cursors, mentions, membership, notification register
	shapeHead              // a head and its group mentions
	shapeDeletions
	shapeThreadHead
	shapeThread
	shapeSettings
	shapeErasure
)

func shapeOf(t PayloadType) shape {
	switch t {
	case ptCursors, ptMentions, ptMembership, ptNotifications:
		return shapeUserChannel
	case ptHead, ptGroupMentions:
		return shapeHead
	case ptDeletions:
		return shapeDeletions
	case ptThreadHead:
		return shapeThreadHead
	case ptThread:
		return shapeThread
	case ptSettings:
		return shapeSettings
	case ptErasure:
		return shapeErasure
	}
	return shapeNone
}

// encodeRecord builds the envelope record of d: its built-in kinds'
// payloads from its fields, then d.Payloads, then the envelope's fields
// this build does not name as they came (d.Extensions of a record decoded
// from an envelope; an earlier message's unknown fields have that
// message's numbers, which would read as other envelope fields).
func encodeRecord(d Decoded) (*kgo.Record, error) {
	var (
		e  RecordEnvelope
		ps []Payload
	)
	add := func(t PayloadType, m proto.Message) error {
		b, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		ps = append(ps, Payload{Type: t, Bytes: b})
		return nil
	}
	var err error
	switch {
	case d.Erasure != nil:
		t := d.Erasure
		e = RecordEnvelope{User: t.User, AcceptedAtUnixMs: t.ErasedAtUnixMs}
		err = add(ptErasure, &recordv1.Erasure{Generation: t.Generation})
	case d.Settings != nil:
		st := d.Settings
		e = RecordEnvelope{User: st.User, Generation: d.Generation, Stamped: d.Stamped, AcceptedAtUnixMs: st.VersionMs}
		err = add(ptSettings, &recordv1.Settings{ShareReadReceipts: st.ShareRead, ShareDeliveryReceipts: st.ShareDelivered,
			VersionUnixMs: st.VersionMs, DefaultNotificationLevel: st.DefaultLevel.String()})
	case d.Thread != nil:
		st := d.Thread
		e = RecordEnvelope{User: st.Key.User, Channel: st.Key.Channel, Root: st.Key.Root, Generation: d.Generation, Stamped: d.Stamped,
			AcceptedAtUnixMs: st.Cursors.UpdatedAtUnixMs}
		reg := &recordv1.ThreadRegister{MentionSeqs: st.Mentions}
		if c := recordCursors(st.Cursors); c != nil {
			reg.Cursors = c
		} else {
			e.AcceptedAtUnixMs = st.Time()
		}
		if st.Follow != (thread.Follow{}) {
			reg.Follow = &recordv1.ThreadFollow{Following: st.Follow.Following, VersionUnixMs: st.Follow.VersionUnixMs}
		}
		err = add(ptThread, reg)
	case d.ThreadHead != nil:
		h := d.ThreadHead
		e = RecordEnvelope{Channel: h.Channel, Root: h.Root, AcceptedAtUnixMs: h.UpdatedAtUnixMs}
		err = add(ptThreadHead, &recordv1.ThreadHead{Head: headCursor(h.Seq, h.MessageID)})
	case d.Deletions != nil:
		del := d.Deletions
		e = RecordEnvelope{Channel: del.Channel, Root: del.Root, AcceptedAtUnixMs: del.UpdatedAtUnixMs}
		err = add(ptDeletions, &recordv1.Deletions{Seqs: del.Seqs})
	case d.Channel != nil:
		h := d.Channel
		e = RecordEnvelope{Channel: h.Channel, AcceptedAtUnixMs: h.UpdatedAtUnixMs}
		err = add(ptHead, &recordv1.Head{Head: headCursor(h.Seq, h.MessageID)})
		if g := d.GroupMentions; err == nil && g != nil && len(g.Mentions) > 0 {
			gm := &recordv1.GroupMentions{Mentions: make([]*recordv1.GroupMention, len(g.Mentions))}
			for i, m := range g.Mentions {
				gm.Mentions[i] = &recordv1.GroupMention{Seq: m.Seq, SenderId: m.Sender}
			}
			err = add(ptGroupMentions, gm)
		}
	default:
		key := d.Key
		if d.Receipt != nil && key == (receipt.Key{}) {
			key = d.Receipt.Key
		}
		e = RecordEnvelope{User: key.User, Channel: key.Channel, Generation: d.Generation, Stamped: d.Stamped, AcceptedAtUnixMs: d.AcceptedAtUnixMs}
		if key == (receipt.Key{}) || d.Envelope.Version >= EnvelopeSchemaVersion && d.Envelope.Root != 0 {
			// Payloads of later kinds alone: their envelope as it came.
			e = d.Envelope
		}
		if s := d.Receipt; s != nil {
			// Cursors carry their own time (and none travel without a
			// position: the record then carries its time alone).
			e.AcceptedAtUnixMs = s.UpdatedAtUnixMs
			if hasCursor(*s) {
				ps = append(ps, Payload{Type: ptCursors, Bytes: appendCursors(nil, *s)})
			}
		}
		if len(d.Mentions) > 0 {
			err = add(ptMentions, &recordv1.MentionSeqs{Seqs: d.Mentions})
		}
		if m := d.Membership; err == nil && m != nil {
			err = add(ptMembership, &recordv1.Membership{Member: m.Member, VersionSeq: m.VersionSeq, VersionUnixMs: m.VersionUnixMs, JoinSeq: m.JoinSeq})
		}
		if n := d.Notifications; err == nil && n != nil {
			err = add(ptNotifications, recordNotifications(*n))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("marshalling the record of %s: %w", e.RecordKey(), err)
	}
	ps = append(ps, d.Payloads...)
	ext := d.Extensions
	if d.Envelope.Version < EnvelopeSchemaVersion {
		ext = nil
	}
	if len(ps) > MaxPayloads {
		return nil, fmt.Errorf("encoding the record of %s: %d payloads, limit %d", e.RecordKey(), len(ps), MaxPayloads)
	}
	size := 48 + len(e.User) + len(e.Channel) + len(ext)
	for _, p := range ps {
		size += 16 + len(p.Bytes)
	}
	v := appendEnvelope(make([]byte, 0, size), e)
	for _, p := range ps {
		v = appendPayload(v, p.Type, p.Bytes)
	}
	v = append(v, ext...)
	key := e.RecordKey()
	if d.Thread != nil || d.Receipt != nil || d.Mentions != nil || d.Membership != nil || d.Notifications != nil {
		// A user's state in a channel is keyed so whatever its ids (an
		// invalid one is refused by the decoder, not moved elsewhere).
		key = receipt.Key{User: e.User, Channel: e.Channel}.KafkaKey()
	}
	return &kgo.Record{Key: []byte(key), Value: v, Headers: recordHeaders}, nil
}

func headCursor(seq int64, messageID string) *recordv1.Cursor {
	return recordCursor(receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: messageID})
}

func hasCursor(s receipt.State) bool {
	return !s.Read.Position.IsZero() || !s.Delivered.Position.IsZero() || !s.PrivateRead.Position.IsZero()
}

// recordCursors is the Cursors message of s, nil when no cursor carries a
// position.
func recordCursors(s receipt.State) *recordv1.Cursors {
	if !hasCursor(s) {
		return nil
	}
	c := &recordv1.Cursors{DeviceId: s.DeviceID}
	if !s.Read.Position.IsZero() {
		c.Read = recordCursor(s.Read)
	}
	if !s.Delivered.Position.IsZero() {
		c.Delivered = recordCursor(s.Delivered)
	}
	if !s.PrivateRead.Position.IsZero() {
		c.PrivateRead = recordCursor(s.PrivateRead)
	}
	return c
}

// decodeEnvelopeRecord reads a Record: the envelope, each built-in
// payload into Decoded's fields (checked as the earlier message of the
// same content is), and the payloads of other types into d.Payloads.
func decodeEnvelopeRecord(r *kgo.Record) (Decoded, error) {
	if v := peekVersion(r.Value); v != 0 && v != EnvelopeSchemaVersion {
		// A later version (or an earlier message under the envelope's
		// header): its fields may mean anything else.
		return Decoded{}, fmt.Errorf("%w: unknown schema version %d", ErrUndecodable, v)
	}
	var raw [MaxPayloads]rawPayload
	e, n, unknown, err := parseEnvelope(r.Value, &raw)
	if err != nil {
		return Decoded{}, err
	}
	if e.Version != EnvelopeSchemaVersion {
		return Decoded{}, fmt.Errorf("%w: unknown schema version %d", ErrUndecodable, e.Version)
	}
	e.Stamped = stamped(e.Stamped, e.Generation)
	sh := shapeNone
	for _, p := range raw[:n] {
		s := shapeOf(p.typ)
		if s == shapeNone {
			continue
		}
		if sh != shapeNone && s != sh {
			return Decoded{}, fmt.Errorf("%w: invalid event: payload %s with %s", ErrUndecodable, p.typ, raw[0].typ)
		}
		sh = s
	}
	if err := validateEnvelope(e, sh == shapeNone); err != nil {
		return Decoded{}, err
	}
	if !e.keyMatches(r.Key) {
		return Decoded{}, fmt.Errorf("%w: record key %q does not match the envelope's key %q", ErrUndecodable, r.Key, e.RecordKey())
	}
	wantUser, wantChannel, wantRoot := sh == shapeUserChannel || sh == shapeThread || sh == shapeSettings || sh == shapeErasure,
		sh == shapeUserChannel || sh == shapeThread || sh == shapeHead || sh == shapeDeletions || sh == shapeThreadHead,
		sh == shapeThread || sh == shapeThreadHead
	if sh != shapeNone && ((e.User != "") != wantUser || (e.Channel != "") != wantChannel || (wantRoot && e.Root == 0) || (!wantRoot && sh != shapeDeletions && e.Root != 0)) {
		return Decoded{}, fmt.Errorf("%w: invalid event: a payload of type %s in a record of user %q, channel %q, thread root %d", ErrUndecodable, raw[0].typ, e.User, e.Channel, e.Root)
	}
	var d Decoded
	switch sh {
	case shapeUserChannel:
		d, err = decodeUserChannelPayloads(r, e, raw[:n], unknown)
	case shapeThread:
		d, err = decodeThreadPayload(r, e, raw[:n])
	case shapeHead, shapeDeletions, shapeThreadHead:
		d, err = decodeChannelPayloads(r, e, raw[:n], sh)
	case shapeSettings, shapeErasure:
		d, err = decodeUserPayload(r, e, raw[:n], sh)
	default:
		if n == 0 && len(unknown) == 0 {
			return Decoded{}, fmt.Errorf("%w: invalid event: it carries no payload", ErrUndecodable)
		}
		d = Decoded{Key: receipt.Key{User: e.User, Channel: e.Channel}, Generation: e.Generation, Stamped: e.Stamped,
			AcceptedAtUnixMs: e.AcceptedAtUnixMs, Extensions: unknown}
		if e.User == "" || e.Channel == "" {
			d.Key = receipt.Key{}
		}
	}
	if err != nil {
		return Decoded{}, err
	}
	d.Envelope = e
	for _, p := range raw[:n] {
		if shapeOf(p.typ) == shapeNone {
			d.Payloads = append(d.Payloads, Payload{Type: p.typ, Bytes: p.bytes})
		}
	}
	return d, nil
}

// unmarshalPayload decodes a built-in payload's message.
func unmarshalPayload(p rawPayload, m proto.Message) error {
	if err := proto.Unmarshal(p.bytes, m); err != nil {
		return fmt.Errorf("%w: unmarshalling payload %s: %v", ErrUndecodable, p.typ, err)
	}
	return nil
}

// decodeUserChannelPayloads reads a user's state in a channel: cursors,
// mentions, membership, the notification register.
func decodeUserChannelPayloads(r *kgo.Record, e RecordEnvelope, ps []rawPayload, unknown []byte) (Decoded, error) {
	key := receipt.Key{User: e.User, Channel: e.Channel}
	d := Decoded{Key: key, Generation: e.Generation, Stamped: e.Stamped, Extensions: unknown}
	var (
		notif    *recordv1.NotificationRegister
		deviceID string
		cursors  bool
	)
	for _, p := range ps {
		switch p.typ {
		case ptCursors:
			st := receipt.State{Key: key, UpdatedAtUnixMs: e.AcceptedAtUnixMs}
			if err := parseCursors(p.bytes, &st); err != nil {
				return Decoded{}, err
			}
			deviceID, cursors = st.DeviceID, true
			if hasCursor(st) {
				d.Receipt = &st
			}
		case ptMentions:
			var m recordv1.MentionSeqs
			if err := unmarshalPayload(p, &m); err != nil {
				return Decoded{}, err
			}
			if len(m.GetSeqs()) > 0 {
				d.Mentions = m.GetSeqs()
			}
		case ptMembership:
			m := &channel.Membership{Key: key}
			if err := parseMembership(p.bytes, m); err != nil {
				return Decoded{}, err
			}
			d.Membership = m
		case ptNotifications:
			notif = &recordv1.NotificationRegister{}
			if err := unmarshalPayload(p, notif); err != nil {
				return Decoded{}, err
			}
			d.Notifications = notificationsFromRecord(key, notif)
		}
	}
	if cursors && d.Receipt == nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: a cursors payload without a position", ErrUndecodable)
	}
	if d.Receipt == nil {
		d.AcceptedAtUnixMs = e.AcceptedAtUnixMs
	}
	return checkUserChannel(nil, d, notif, deviceID)
}

// decodeThreadPayload reads a user's thread register, as the thread event
// of the same content (decodeThreadUser).
func decodeThreadPayload(r *kgo.Record, e RecordEnvelope, ps []rawPayload) (Decoded, error) {
	var reg recordv1.ThreadRegister
	if err := unmarshalPayload(ps[0], &reg); err != nil {
		return Decoded{}, err
	}
	c := reg.GetCursors()
	if c != nil && c.GetRead().GetPosition().GetSeq() == 0 && c.GetRead().GetPosition().GetEpoch() == 0 &&
		c.GetDelivered().GetPosition().GetSeq() == 0 && c.GetDelivered().GetPosition().GetEpoch() == 0 &&
		c.GetPrivateRead().GetPosition().GetSeq() == 0 && c.GetPrivateRead().GetPosition().GetEpoch() == 0 {
		return Decoded{}, fmt.Errorf("%w: invalid event: thread cursors without a position", ErrUndecodable)
	}
	ev := &recordv1.ReceiptEvent{SchemaVersion: ThreadSchemaVersion, UserId: e.User, ChannelId: e.Channel,
		Read: c.GetRead(), Delivered: c.GetDelivered(), PrivateRead: c.GetPrivateRead(), DeviceId: c.GetDeviceId(),
		AcceptedAtUnixMs: e.AcceptedAtUnixMs, MentionSeqs: reg.GetMentionSeqs(), UserGeneration: e.Generation,
		UserGenerationStamped: e.Stamped, ThreadRootSeq: e.Root, Follow: reg.GetFollow()}
	return decodeThreadUser(r, ev)
}

// decodeChannelPayloads reads a channel's (or a thread's) head or
// deleted seqs, as the channel event of the same content.
func decodeChannelPayloads(r *kgo.Record, e RecordEnvelope, ps []rawPayload, sh shape) (Decoded, error) {
	var (
		head    receipt.Cursor
		hasHead bool
		gms     []channel.GroupMention
		deleted []int64
	)
	for _, p := range ps {
		switch p.typ {
		case ptHead, ptThreadHead:
			// Head and ThreadHead share their fields (and bytes); read by
			// hand, as cursors are: one per message notice.
			var err error
			if hasHead, err = parseHead(p.bytes, &head); err != nil {
				return Decoded{}, err
			}
			if !hasHead {
				return Decoded{}, fmt.Errorf("%w: invalid event: a head payload without a head", ErrUndecodable)
			}
		case ptGroupMentions:
			var err error
			if gms, err = parseGroupMentions(p.bytes); err != nil {
				return Decoded{}, err
			}
			if len(gms) == 0 {
				return Decoded{}, fmt.Errorf("%w: invalid event: a group mentions payload without mentions", ErrUndecodable)
			}
		case ptDeletions:
			var del recordv1.Deletions
			if err := unmarshalPayload(p, &del); err != nil {
				return Decoded{}, err
			}
			if len(del.GetSeqs()) == 0 {
				return Decoded{}, fmt.Errorf("%w: invalid event: a deletions payload without seqs", ErrUndecodable)
			}
			deleted = del.GetSeqs()
		}
	}
	// The earlier message of the same content, for its checks.
	ev := func() *recordv1.ChannelEvent {
		return &recordv1.ChannelEvent{SchemaVersion: MaxSchemaVersion, ChannelId: e.Channel, AcceptedAtUnixMs: e.AcceptedAtUnixMs, ThreadRootSeq: e.Root}
	}
	switch sh {
	case shapeDeletions:
		del := ev()
		del.DeletedSeqs = deleted
		return decodeDeletions(r, del)
	case shapeThreadHead:
		th := ev()
		th.Head = recordCursor(head)
		return decodeThreadHead(r, th)
	}
	if !hasHead {
		return Decoded{}, fmt.Errorf("%w: invalid event: group mentions without a head", ErrUndecodable)
	}
	d, err := decodeHead(r, e.Channel, head, e.AcceptedAtUnixMs)
	if err != nil {
		return Decoded{}, err
	}
	if d.GroupMentions, err = checkGroupMentions(MaxSchemaVersion, e.Channel, gms); err != nil {
		return Decoded{}, err
	}
	return d, nil
}

// decodeUserPayload reads a user-wide record: settings or an erasure, as
// the user event of the same content.
func decodeUserPayload(r *kgo.Record, e RecordEnvelope, ps []rawPayload, sh shape) (Decoded, error) {
	ev := &recordv1.UserEvent{SchemaVersion: SchemaVersion, UserId: e.User, AcceptedAtUnixMs: e.AcceptedAtUnixMs}
	if sh == shapeErasure {
		if e.Generation != 0 || e.Stamped {
			return Decoded{}, fmt.Errorf("%w: invalid event: an erasure is not stamped", ErrUndecodable)
		}
		var er recordv1.Erasure
		if err := unmarshalPayload(ps[0], &er); err != nil {
			return Decoded{}, err
		}
		ev.ErasedGeneration = er.GetGeneration()
		if ev.ErasedGeneration == 0 {
			return Decoded{}, fmt.Errorf("%w: invalid event: an erasure without a generation", ErrUndecodable)
		}
		return decodeUserEvent(r, ev)
	}
	ev.Settings = &recordv1.Settings{}
	if err := unmarshalPayload(ps[0], ev.Settings); err != nil {
		return Decoded{}, err
	}
	ev.UserGeneration, ev.UserGenerationStamped = e.Generation, e.Stamped
	return decodeSettings(r, ev)
}

// BuiltinPayload reports whether this package decodes payloads of type t
// itself (into Decoded's fields); a kind's own payload type is none of
// them.
func BuiltinPayload(t PayloadType) bool { return shapeOf(t) != shapeNone }
