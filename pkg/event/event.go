package event

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/receipt"
)

// SchemaVersion is the version this build writes and the only one it reads.
const SchemaVersion = 1

// MaxValueBytes bounds a record value; a real event is well under 1 KiB.
const MaxValueBytes = 4096

// Topic defaults.
const (
	TopicDefault    = "read-receipts"
	DLTTopicDefault = "read-receipts-dlt"
)

// ErrUndecodable marks a record that can never be decoded or is invalid:
// retrying it cannot help, so it goes to the dead-letter topic.
var ErrUndecodable = errors.New("undecodable record")

// Encode builds the record for a state: key "user:channel", protobuf value.
func Encode(s receipt.State) (*kgo.Record, error) {
	v, err := proto.Marshal(ToProto(s))
	if err != nil {
		return nil, fmt.Errorf("marshalling event %s: %w", s.Key.KafkaKey(), err)
	}
	return &kgo.Record{Key: []byte(s.Key.KafkaKey()), Value: v}, nil
}

// Decode parses and validates a record. Every failure wraps ErrUndecodable
// and says why.
func Decode(r *kgo.Record) (receipt.State, error) {
	if len(r.Value) > MaxValueBytes {
		return receipt.State{}, fmt.Errorf("%w: value is %d bytes, limit %d", ErrUndecodable, len(r.Value), MaxValueBytes)
	}
	var ev receiptsv1.ReceiptEvent
	if err := proto.Unmarshal(r.Value, &ev); err != nil {
		return receipt.State{}, fmt.Errorf("%w: unmarshalling protobuf: %v", ErrUndecodable, err)
	}
	if ev.GetSchemaVersion() != SchemaVersion {
		return receipt.State{}, fmt.Errorf("%w: unknown schema version %d", ErrUndecodable, ev.GetSchemaVersion())
	}
	s := FromProto(&ev)
	if err := s.Validate(); err != nil {
		return receipt.State{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if string(r.Key) != s.Key.KafkaKey() {
		return receipt.State{}, fmt.Errorf("%w: record key %q does not match event key %q", ErrUndecodable, r.Key, s.Key.KafkaKey())
	}
	return s, nil
}

// ToProto converts a state to the wire event.
func ToProto(s receipt.State) *receiptsv1.ReceiptEvent {
	ev := &receiptsv1.ReceiptEvent{
		SchemaVersion:    SchemaVersion,
		UserId:           s.Key.User,
		ChannelId:        s.Key.Channel,
		DeviceId:         s.DeviceID,
		AcceptedAtUnixMs: s.UpdatedAtUnixMs,
	}
	if !s.Read.Position.IsZero() {
		ev.Read = CursorToProto(s.Read)
	}
	if !s.Delivered.Position.IsZero() {
		ev.Delivered = CursorToProto(s.Delivered)
	}
	return ev
}

// FromProto converts a wire event to a state, without validating it.
func FromProto(ev *receiptsv1.ReceiptEvent) receipt.State {
	return receipt.State{
		Key:             receipt.Key{User: ev.GetUserId(), Channel: ev.GetChannelId()},
		Read:            CursorFromProto(ev.GetRead()),
		Delivered:       CursorFromProto(ev.GetDelivered()),
		DeviceID:        ev.GetDeviceId(),
		UpdatedAtUnixMs: ev.GetAcceptedAtUnixMs(),
	}
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
	out := receipt.Cursor{Position: receipt.Position{Epoch: c.GetPosition().GetEpoch(), Seq: c.GetPosition().GetSeq()}}
	if !out.Position.IsZero() {
		out.MessageID = c.GetMessageId()
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
	if !s.Delivered.Position.IsZero() {
		cs.Delivered = CursorToProto(s.Delivered)
	}
	return cs
}
