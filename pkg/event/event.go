package event

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/tombstone"
)

// SchemaVersion is the version this build writes. It reads MinSchemaVersion
// to SchemaVersion: a version-1 event is a plain cursor event; version 2
// adds the private read cursor, mentions, membership and the channel event;
// version 3 the user's erasure generation on user events and the user
// event (key "u::user": an erasure tombstone). Roll out consumers
// (persister, dlt-reconciler) before the gateway, so that nothing that
// only reads older versions sees a newer event.
//
// Version 4 adds threads: a thread event (a user's thread register, a
// thread's head) is written as version 4, everything else still as 3, so
// channel-only traffic reads the same in builds before threads.
//
// Version 5 adds the notification register: only an event carrying one
// is written as version 5.
//
// Version 6 adds a channel's deleted seqs: a channel event carrying them
// (and no head) is written as version 6.
// Version 7 adds a channel's group mentions: only a channel event
// carrying some is written as version 7.
// Version 8 adds a thread's deleted replies: a channel event with deleted
// seqs and a thread root is written as version 8 (an older build refuses
// it rather than read it as a thread head).
const (
	SchemaVersion               = 3
	ThreadSchemaVersion         = 4
	NotificationSchemaVersion   = 5
	DeletionSchemaVersion       = 6
	GroupMentionSchemaVersion   = 7
	ThreadDeletionSchemaVersion = 8
	MinSchemaVersion            = 1
	MaxSchemaVersion            = ThreadDeletionSchemaVersion
)

// MaxValueBytes bounds a record value; a real event is well under 1 KiB
// (mentions are bounded by channel.MaxMentionSeqs).
const MaxValueBytes = 4096

// Topic defaults.
const (
	TopicDefault    = "read-receipts"
	DLTTopicDefault = "read-receipts-dlt"
)

// ErrUndecodable marks a record that can never be decoded or is invalid:
// retrying it cannot help, so it goes to the dead-letter topic.
var ErrUndecodable = errors.New("undecodable record")

// Decoded is one record of the topic: its envelope, and its payloads.
// The payloads of the kinds this package always decoded are its fields
// (Receipt … Deletions, each nil when absent, with Key, Generation,
// Stamped and AcceptedAtUnixMs as those kinds' callers read them); that
// set is closed. A kind added later is a payload of a type of its own,
// kept in Payloads for its kind to decode (kind.Spec's Payload), so
// Decoded does not grow with the kinds. Records of the builds before the
// envelope decode to the same fields, with the Envelope they imply.
type Decoded struct {
	// Envelope is the record's envelope. Left out of the JSON form, which
	// is the fields' (the golden records').
	Envelope RecordEnvelope `json:"-"`
	// Payloads are the record's payloads of types this package does not
	// decode (a later kind's), in the order they came.
	Payloads []Payload `json:",omitempty"`

	// Key is the user event's key.
	Key receipt.Key
	// Receipt holds the user event's cursors, nil when it carries none.
	Receipt *receipt.State
	// Mentions are message seqs mentioning the user, to add.
	Mentions []int64
	// Membership is the user's register in the channel, nil when absent.
	Membership *channel.Membership
	// Channel is the channel event's head, nil for a user event.
	Channel *channel.Head
	// GroupMentions are a channel event's group mentions (with its head),
	// nil when it carries none.
	GroupMentions *channel.GroupMentions
	// Erasure is a user-wide event's tombstone (key "u::user"); nil for
	// the other kinds.
	Erasure *tombstone.Tombstone
	// Settings is a user-wide event's privacy settings (key "u::user");
	// nil for the other kinds.
	Settings *privacy.Settings

	// Generation is the user's erasure generation the gateway read when it
	// accepted a user event (0: never erased, or not known); Stamped
	// tells which: a stamped event is ordered against an erasure by its
	// generation alone (tombstone.Drops).
	Generation int64
	Stamped    bool
	// AcceptedAtUnixMs is when the gateway accepted a user event that
	// carries no cursor (Receipt.UpdatedAtUnixMs holds it otherwise).
	AcceptedAtUnixMs int64
	// Thread is a user's thread register (a user event with a thread root:
	// Key is then the thread's (user, channel)); ThreadHead a thread's
	// head (a channel event with a thread root). Nil for the other kinds.
	Thread     *thread.State
	ThreadHead *thread.Head
	// Notifications is the user's notification register in the channel
	// (a user event), nil when absent.
	Notifications *notification.Register
	// Deletions are a channel's deleted seqs (a channel event without a
	// head), nil for the other kinds.
	Deletions *channel.Deletions

	// Extensions are the record's fields this build's contract does not
	// name (protobuf's unknown fields of a user event or an envelope),
	// carried on as they came when the record is encoded again.
	Extensions []byte
}

// AcceptedAt is when the gateway accepted a user event: the cursors'
// time, else the event's own, else the membership register's version time
// (events written before version 3 carry no time without cursors).
func (d Decoded) AcceptedAt() int64 {
	switch {
	case d.Receipt != nil && d.Receipt.UpdatedAtUnixMs > 0:
		return d.Receipt.UpdatedAtUnixMs
	case d.AcceptedAtUnixMs > 0:
		return d.AcceptedAtUnixMs
	case d.Membership != nil:
		return d.Membership.VersionUnixMs
	case d.Thread != nil:
		return d.Thread.Time()
	case d.Notifications != nil:
		return d.Notifications.VersionUnixMs
	}
	return d.Envelope.AcceptedAtUnixMs
}

// stamped reads a user event's stamp: the flag, or a generation above 0
// (which only a stamp sets: events of builds before the flag).
func stamped(flag bool, gen int64) bool { return flag || gen > 0 }

// validateStamp bounds an event's erasure generation and acceptance time
// (0 … receipt.MaxSeq): a generation past every real one would keep the
// event through any erasure.
func validateStamp(gen, acceptedAtMs int64) error {
	if gen < 0 || gen > receipt.MaxSeq || acceptedAtMs < 0 || acceptedAtMs > receipt.MaxSeq {
		return fmt.Errorf("%w: invalid event: user_generation %d or accepted_at_unix_ms %d outside 0 … %d", ErrUndecodable, gen, acceptedAtMs, receipt.MaxSeq)
	}
	return nil
}

// User is the user an event is about ("" for a channel event).
func (d Decoded) User() string {
	if d.Envelope.Version >= EnvelopeSchemaVersion {
		return d.Envelope.User
	}
	if d.Erasure != nil {
		return d.Erasure.User
	}
	if d.Settings != nil {
		return d.Settings.User
	}
	return d.Key.User
}

// RecordKey is the record key of what d carries.
func (d Decoded) RecordKey() string {
	if d.Envelope.Version >= EnvelopeSchemaVersion {
		return d.Envelope.RecordKey()
	}
	if d.Channel != nil {
		return receipt.EscapeKeyID(d.Channel.Channel)
	}
	if d.ThreadHead != nil {
		return receipt.EscapeKeyID(d.ThreadHead.Channel)
	}
	if d.Deletions != nil {
		return receipt.EscapeKeyID(d.Deletions.Channel)
	}
	if d.Erasure != nil {
		return UserKey(d.Erasure.User)
	}
	if d.Settings != nil {
		return UserKey(d.Settings.User)
	}
	return d.Key.KafkaKey()
}

// Encode builds the record for a state: key "user:channel" (ids escaped,
// receipt.Key.KafkaKey), protobuf value.
func Encode(s receipt.State) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{Key: s.Key, Receipt: &s})
}

// EncodeHead builds the channel event of a head: key = the escaped channel
// id (receipt.EscapeKeyID).
func EncodeHead(h channel.Head) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{Channel: &h})
}

// EncodeMembership builds the user event of a membership register, with
// the cursors of st when st is not nil (a join raises the private read).
func EncodeMembership(m channel.Membership, st *receipt.State) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{Key: m.Key, Membership: &m, Receipt: st})
}

// EncodeMentions builds the user event adding mention seqs.
func EncodeMentions(k receipt.Key, seqs []int64) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{Key: k, Mentions: seqs})
}

// EncodeDecoded builds the record of d: an envelope (a Record) with a
// payload per kind d carries, keyed by the envelope (Envelope.RecordKey).
// d.Envelope is not read: the envelope follows from the fields (a record
// of payloads alone is EncodeEnvelope's).
func EncodeDecoded(d Decoded) (*kgo.Record, error) { return encodeRecord(d) }

// encodeLegacy builds the record of d as the builds before the envelope
// wrote it (a ReceiptEvent, ChannelEvent or UserEvent, told apart by the
// key): what the tests of the earlier format decode.
func encodeLegacy(d Decoded) (*kgo.Record, error) {
	var (
		msg proto.Message
		key string
	)
	if d.Erasure != nil || d.Settings != nil {
		return encodeUser(d)
	}
	if d.Thread != nil || d.ThreadHead != nil {
		return encodeThread(d)
	}
	if d.Deletions != nil {
		key = receipt.EscapeKeyID(d.Deletions.Channel)
		version := uint32(DeletionSchemaVersion)
		if d.Deletions.Root != 0 {
			version = ThreadDeletionSchemaVersion
		}
		msg = &recordv1.ChannelEvent{
			SchemaVersion:    version,
			ChannelId:        d.Deletions.Channel,
			ThreadRootSeq:    d.Deletions.Root,
			DeletedSeqs:      d.Deletions.Seqs,
			AcceptedAtUnixMs: d.Deletions.UpdatedAtUnixMs,
		}
	} else if d.Channel != nil {
		h := d.Channel
		key = receipt.EscapeKeyID(h.Channel)
		msg = &recordv1.ChannelEvent{
			SchemaVersion:    SchemaVersion,
			ChannelId:        h.Channel,
			Head:             recordCursor(receipt.Cursor{Position: receipt.Position{Seq: h.Seq}, MessageID: h.MessageID}),
			AcceptedAtUnixMs: h.UpdatedAtUnixMs,
		}
		addGroupMentions(msg.(*recordv1.ChannelEvent), d.GroupMentions)
	} else {
		ev := UserEventToProto(d)
		key = receipt.Key{User: ev.GetUserId(), Channel: ev.GetChannelId()}.KafkaKey()
		// The fields this build does not name travel on as they came.
		ev.ProtoReflect().SetUnknown(d.Extensions)
		msg = ev
	}
	v, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("marshalling event %s: %w", key, err)
	}
	return typed(&kgo.Record{Key: []byte(key), Value: v}), nil
}

// Decode parses and validates a record carrying cursors (any user event
// of version 1, or of version 2 with at least one cursor). Every failure
// wraps ErrUndecodable and says why. DecodeRecord reads every kind.
func Decode(r *kgo.Record) (receipt.State, error) {
	d, err := DecodeRecord(r)
	if err != nil {
		return receipt.State{}, err
	}
	if d.Receipt == nil {
		return receipt.State{}, fmt.Errorf("%w: record %q carries no cursor", ErrUndecodable, r.Key)
	}
	return *d.Receipt, nil
}

// DecodeRecord parses and validates a record of either kind, told apart
// by the key's shape: a key without ':' is a channel event. The ids come
// from the value; the key must be the one they make, escaped or (a record
// of the builds before the escape) as they are. Every failure wraps
// ErrUndecodable and says why.
func DecodeRecord(r *kgo.Record) (Decoded, error) {
	if len(r.Value) > MaxValueBytes {
		return Decoded{}, fmt.Errorf("%w: value is %d bytes, limit %d", ErrUndecodable, len(r.Value), MaxValueBytes)
	}
	if isEnvelope(r) {
		return decodeEnvelopeRecord(r)
	}
	if err := checkType(r); err != nil {
		return Decoded{}, err
	}
	d, err := decodeLegacy(r)
	if err != nil {
		return Decoded{}, err
	}
	d.Envelope = legacyEnvelope(d)
	return d, nil
}

// decodeLegacy reads a record of the builds before the envelope, told
// apart by its key.
func decodeLegacy(r *kgo.Record) (Decoded, error) {
	if bytes.HasPrefix(r.Key, []byte(userKeyPrefix)) {
		return decodeUser(r)
	}
	if !bytes.ContainsRune(r.Key, ':') {
		return decodeChannel(r)
	}
	var ev recordv1.ReceiptEvent
	if err := proto.Unmarshal(r.Value, &ev); err != nil {
		return Decoded{}, fmt.Errorf("%w: unmarshalling protobuf: %v", ErrUndecodable, err)
	}
	v := ev.GetSchemaVersion()
	if v < MinSchemaVersion || v > MaxSchemaVersion {
		return Decoded{}, fmt.Errorf("%w: unknown schema version %d", ErrUndecodable, v)
	}
	if ev.GetThreadRootSeq() != 0 || ev.GetFollow() != nil {
		return decodeThreadUser(r, &ev)
	}
	d := UserEventFromProto(&ev)
	d.Extensions = ev.ProtoReflect().GetUnknown()
	if v == 1 && (d.Receipt == nil || d.Mentions != nil || d.Membership != nil || !d.Receipt.PrivateRead.Position.IsZero()) {
		return Decoded{}, fmt.Errorf("%w: a version-1 event carries cursors only", ErrUndecodable)
	}
	if ev.GetNotifications() != nil && v < NotificationSchemaVersion {
		return Decoded{}, fmt.Errorf("%w: a notification register in a version-%d event", ErrUndecodable, v)
	}
	return checkUserChannel(r, d, ev.GetNotifications(), ev.GetDeviceId())
}

// checkUserChannel validates a user's state in a channel (notif: the
// register as the record carried it, deviceID the record's device), and
// that r's key is its (r nil: an envelope's, checked already).
func checkUserChannel(r *kgo.Record, d Decoded, notif *recordv1.NotificationRegister, deviceID string) (Decoded, error) {
	if err := validateStamp(d.Generation, d.AcceptedAtUnixMs); err != nil {
		return Decoded{}, err
	}
	if err := receipt.ValidateID("user_id", d.Key.User); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if err := receipt.ValidateID("channel_id", d.Key.Channel); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if d.Receipt == nil && d.Mentions == nil && d.Membership == nil && d.Notifications == nil && len(d.Extensions) == 0 {
		return Decoded{}, fmt.Errorf("%w: invalid event: it carries no cursor, mention, membership or notifications", ErrUndecodable)
	}
	if notif != nil {
		if d.Notifications == nil {
			return Decoded{}, fmt.Errorf("%w: invalid event: unknown notification level %q", ErrUndecodable, notif.GetLevel())
		}
		if err := d.Notifications.Validate(); err != nil {
			return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
		}
	}
	if d.Receipt != nil {
		if err := d.Receipt.Validate(); err != nil {
			return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
		}
	} else if err := receipt.ValidateOptionalID("device_id", deviceID); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if err := channel.ValidateMentionSeqs(d.Mentions); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if d.Membership != nil {
		if err := d.Membership.Validate(); err != nil {
			return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
		}
	}
	if r != nil && !matchesKey(r.Key, d.Key.KafkaKey(), d.Key.LegacyKafkaKey()) {
		return Decoded{}, fmt.Errorf("%w: record key %q does not match event key %q", ErrUndecodable, r.Key, d.Key.KafkaKey())
	}
	return d, nil
}

// legacyEnvelope is the envelope a record of an earlier build implies:
// the ids, root, stamp and accepted_at_unix_ms its message carried.
func legacyEnvelope(d Decoded) RecordEnvelope {
	e := RecordEnvelope{Version: MaxSchemaVersion, User: d.User(), Generation: d.Generation, Stamped: d.Stamped, AcceptedAtUnixMs: d.AcceptedAtUnixMs}
	switch {
	case d.Channel != nil:
		e.Channel, e.AcceptedAtUnixMs = d.Channel.Channel, d.Channel.UpdatedAtUnixMs
	case d.ThreadHead != nil:
		e.Channel, e.Root, e.AcceptedAtUnixMs = d.ThreadHead.Channel, d.ThreadHead.Root, d.ThreadHead.UpdatedAtUnixMs
	case d.Deletions != nil:
		e.Channel, e.Root, e.AcceptedAtUnixMs = d.Deletions.Channel, d.Deletions.Root, d.Deletions.UpdatedAtUnixMs
	case d.Erasure != nil:
		e.AcceptedAtUnixMs = d.Erasure.ErasedAtUnixMs
	case d.Settings != nil:
	case d.Thread != nil:
		e.Channel, e.Root = d.Key.Channel, d.Thread.Key.Root
		if hasCursor(d.Thread.Cursors) {
			e.AcceptedAtUnixMs = d.Thread.Cursors.UpdatedAtUnixMs
		}
	default:
		e.Channel = d.Key.Channel
		if d.Receipt != nil {
			e.AcceptedAtUnixMs = d.Receipt.UpdatedAtUnixMs
		}
	}
	return e
}

// legacyChannelKey is the key of ch's channel events before the escape.
func legacyChannelKey(ch string) string {
	if strings.IndexByte(ch, ':') >= 0 {
		return ""
	}
	return ch
}

func decodeChannel(r *kgo.Record) (Decoded, error) {
	var ev recordv1.ChannelEvent
	if err := proto.Unmarshal(r.Value, &ev); err != nil {
		return Decoded{}, fmt.Errorf("%w: unmarshalling protobuf: %v", ErrUndecodable, err)
	}
	if v := ev.GetSchemaVersion(); v < 2 || v > MaxSchemaVersion {
		return Decoded{}, fmt.Errorf("%w: unknown channel event schema version %d", ErrUndecodable, v)
	}
	if len(ev.GetDeletedSeqs()) > 0 {
		return decodeDeletions(r, &ev)
	}
	if ev.GetThreadRootSeq() != 0 {
		return decodeThreadHead(r, &ev)
	}
	return decodeChannelEvent(r, &ev)
}

// decodeChannelEvent validates a channel event's head and group mentions.
func decodeChannelEvent(r *kgo.Record, ev *recordv1.ChannelEvent) (Decoded, error) {
	c := receipt.Cursor{Position: receipt.Position{Epoch: ev.GetHead().GetPosition().GetEpoch(), Seq: ev.GetHead().GetPosition().GetSeq()},
		MessageID: ev.GetHead().GetMessageId()}
	d, err := decodeHead(r, ev.GetChannelId(), c, ev.GetAcceptedAtUnixMs())
	if err != nil {
		return Decoded{}, err
	}
	if d.GroupMentions, err = decodeGroupMentions(ev.GetSchemaVersion(), ev.GetChannelId(), ev.GetGroupMentions()); err != nil {
		return Decoded{}, err
	}
	return d, nil
}

// decodeHead validates a channel's head (at c).
func decodeHead(r *kgo.Record, ch string, c receipt.Cursor, acceptedAtMs int64) (Decoded, error) {
	if c.Position.Epoch != 0 {
		return Decoded{}, fmt.Errorf("%w: invalid event: a head has no epoch", ErrUndecodable)
	}
	h := channel.Head{Channel: ch, Seq: c.Position.Seq, MessageID: c.MessageID, UpdatedAtUnixMs: acceptedAtMs}
	if err := h.Validate(); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if !matchesKey(r.Key, receipt.EscapeKeyID(h.Channel), legacyChannelKey(h.Channel)) {
		return Decoded{}, fmt.Errorf("%w: record key %q does not match channel %q", ErrUndecodable, r.Key, h.Channel)
	}
	return Decoded{Channel: &h}, nil
}

// ToProto converts a state to the wire event.
func ToProto(s receipt.State) *recordv1.ReceiptEvent {
	return UserEventToProto(Decoded{Key: s.Key, Receipt: &s})
}

// UserEventToProto converts a user event to the wire event.
func UserEventToProto(d Decoded) *recordv1.ReceiptEvent {
	key := d.Key
	if d.Receipt != nil && key == (receipt.Key{}) {
		key = d.Receipt.Key
	}
	ev := &recordv1.ReceiptEvent{
		SchemaVersion: SchemaVersion,
		UserId:        key.User,
		ChannelId:     key.Channel,
		MentionSeqs:   d.Mentions,
		// Set without cursors; cursors carry their own time below.
		AcceptedAtUnixMs:      d.AcceptedAtUnixMs,
		UserGeneration:        d.Generation,
		UserGenerationStamped: d.Stamped,
	}
	if s := d.Receipt; s != nil {
		ev.DeviceId, ev.AcceptedAtUnixMs = s.DeviceID, s.UpdatedAtUnixMs
		if !s.Read.Position.IsZero() {
			ev.Read = recordCursor(s.Read)
		}
		if !s.Delivered.Position.IsZero() {
			ev.Delivered = recordCursor(s.Delivered)
		}
		if !s.PrivateRead.Position.IsZero() {
			ev.PrivateRead = recordCursor(s.PrivateRead)
		}
	}
	if m := d.Membership; m != nil {
		ev.Membership = &recordv1.Membership{ChannelId: key.Channel, UserId: key.User, Member: m.Member,
			VersionSeq: m.VersionSeq, VersionUnixMs: m.VersionUnixMs, JoinSeq: m.JoinSeq}
	}
	if n := d.Notifications; n != nil {
		ev.SchemaVersion = NotificationSchemaVersion
		ev.Notifications = recordNotifications(*n)
	}
	return ev
}

// FromProto converts a wire event's cursors to a state, without
// validating it.
func FromProto(ev *recordv1.ReceiptEvent) receipt.State {
	return receipt.State{
		Key:             receipt.Key{User: ev.GetUserId(), Channel: ev.GetChannelId()},
		Read:            cursorFromRecord(ev.GetRead()),
		PrivateRead:     cursorFromRecord(ev.GetPrivateRead()),
		Delivered:       cursorFromRecord(ev.GetDelivered()),
		DeviceID:        ev.GetDeviceId(),
		UpdatedAtUnixMs: ev.GetAcceptedAtUnixMs(),
	}
}

// UserEventFromProto converts a wire event, without validating it:
// Receipt is set when a cursor carries a position, Membership when the
// event has one (its ids are the event's: the register's own copies are
// redundant and ignored).
func UserEventFromProto(ev *recordv1.ReceiptEvent) Decoded {
	st := FromProto(ev)
	d := Decoded{Key: st.Key, Generation: ev.GetUserGeneration(), Stamped: stamped(ev.GetUserGenerationStamped(), ev.GetUserGeneration())}
	if !st.Read.Position.IsZero() || !st.Delivered.Position.IsZero() || !st.PrivateRead.Position.IsZero() {
		d.Receipt = &st
	} else {
		d.AcceptedAtUnixMs = ev.GetAcceptedAtUnixMs()
	}
	if len(ev.GetMentionSeqs()) > 0 {
		d.Mentions = ev.GetMentionSeqs()
	}
	if m := ev.GetMembership(); m != nil {
		d.Membership = &channel.Membership{Key: st.Key, Member: m.GetMember(), VersionSeq: m.GetVersionSeq(),
			VersionUnixMs: m.GetVersionUnixMs(), JoinSeq: m.GetJoinSeq()}
	}
	if n := ev.GetNotifications(); n != nil {
		d.Notifications = notificationsFromRecord(st.Key, n)
	}
	return d
}

// notificationsFromRecord converts a notification register of key, nil
// for an unknown level (which DecodeRecord refuses).
func notificationsFromRecord(key receipt.Key, n *recordv1.NotificationRegister) *notification.Register {
	l, ok := notification.Parse(n.GetLevel())
	if !ok {
		return nil
	}
	return &notification.Register{Key: key, Level: l, MutedUntilUnixMs: n.GetMutedUntilUnixMs(), VersionUnixMs: n.GetVersionUnixMs()}
}

// NotificationsToProto converts a notification register to its API form.
func NotificationsToProto(r notification.Register) *receiptsv1.NotificationRegister {
	return &receiptsv1.NotificationRegister{Level: r.Level.String(), MutedUntilUnixMs: r.MutedUntilUnixMs, VersionUnixMs: r.VersionUnixMs}
}

// EncodeNotifications builds the user event of a notification register.
func EncodeNotifications(r notification.Register, gen int64, stamped bool) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{Key: r.Key, Notifications: &r, Generation: gen, Stamped: stamped, AcceptedAtUnixMs: r.VersionUnixMs})
}

// CursorToProto converts a cursor to its API form.
func CursorToProto(c receipt.Cursor) *receiptsv1.Cursor {
	return &receiptsv1.Cursor{
		Position:  &receiptsv1.Position{Epoch: c.Position.Epoch, Seq: c.Position.Seq},
		MessageId: c.MessageID,
	}
}

// CursorFromProto converts an API cursor; nil is the zero cursor. A message
// id without a position names nothing and is dropped, so that a cursor
// means the same after any number of encode/decode round trips.
func CursorFromProto(c *receiptsv1.Cursor) receipt.Cursor {
	return cursorOf(c.GetPosition().GetEpoch(), c.GetPosition().GetSeq(), c.GetMessageId())
}

// cursorOf is the cursor at (epoch, seq) with its message id, dropped
// without a position (CursorFromProto).
func cursorOf(epoch, seq int64, messageID string) receipt.Cursor {
	out := receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: seq}}
	if !out.Position.IsZero() {
		out.MessageID = messageID
	}
	return out
}

// StateToProto converts a state to the API's ChannelState.
func StateToProto(s receipt.State) *receiptsv1.ChannelState {
	cs := &receiptsv1.ChannelState{
		ChannelId:       s.Key.Channel,
		DeviceId:        s.DeviceID,
		UpdatedAtUnixMs: s.UpdatedAtUnixMs,
	}
	// An unset cursor is left out rather than shown as position {}.
	if !s.Read.Position.IsZero() {
		cs.Read = CursorToProto(s.Read)
	}
	if p := s.Canonical().PrivateRead; !p.Position.IsZero() {
		cs.PrivateRead = CursorToProto(p)
	}
	if !s.Delivered.Position.IsZero() {
		cs.Delivered = CursorToProto(s.Delivered)
	}
	return cs
}

// decodeDeletions reads a channel event of deleted seqs (version 6, no
// head; with a thread root, version 8).
func decodeDeletions(r *kgo.Record, ev *recordv1.ChannelEvent) (Decoded, error) {
	if ev.GetSchemaVersion() < DeletionSchemaVersion {
		return Decoded{}, fmt.Errorf("%w: deleted seqs in a version-%d event", ErrUndecodable, ev.GetSchemaVersion())
	}
	if ev.GetThreadRootSeq() != 0 && ev.GetSchemaVersion() < ThreadDeletionSchemaVersion {
		return Decoded{}, fmt.Errorf("%w: deleted thread replies in a version-%d event", ErrUndecodable, ev.GetSchemaVersion())
	}
	if ev.GetHead() != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: deleted seqs with a head", ErrUndecodable)
	}
	d := channel.Deletions{Channel: ev.GetChannelId(), Root: ev.GetThreadRootSeq(), Seqs: ev.GetDeletedSeqs(), UpdatedAtUnixMs: ev.GetAcceptedAtUnixMs()}
	if err := d.Validate(); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if !matchesKey(r.Key, receipt.EscapeKeyID(d.Channel), "") {
		return Decoded{}, fmt.Errorf("%w: record key %q does not match channel %q", ErrUndecodable, r.Key, d.Channel)
	}
	return Decoded{Deletions: &d}, nil
}
