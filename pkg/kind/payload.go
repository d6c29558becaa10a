package kind

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
)

// Payload is a kind's own part of a record: a message of records.proto
// named by Type, which the kind encodes and decodes itself. pkg/event
// decodes the envelope and the payloads of the kinds it always had (into
// event.Decoded's fields); a kind added later sets Payload, and its
// records reach it through event.Decoded.Payloads, decoded by
// DecodeRecord: adding a kind touches no code of pkg/event.
type Payload[V any] struct {
	Type event.PayloadType
	// Decode reads and validates the payload of a record of envelope e:
	// every bound the kind's values keep is checked here (a failure sends
	// the record to the dead-letter topic with its reason).
	Decode func(e event.RecordEnvelope, b []byte) (V, error)
	// Encode is v's envelope (its ids, root and time; the stamp is the
	// caller's) and its payload's bytes.
	Encode func(v V) (event.RecordEnvelope, []byte, error)
}

// Record builds the record of v, a value of s's kind (Spec.Payload).
func Record[K comparable, V any](s *Spec[K, V], v V) (*kgo.Record, error) {
	if s.Payload == nil {
		return nil, fmt.Errorf("kind %s has no payload of its own", s.Name)
	}
	e, b, err := s.Payload.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("encoding a %s payload: %w", s.Name, err)
	}
	return event.EncodeEnvelope(e, event.Payload{Type: s.Payload.Type, Bytes: b})
}

// fromEvent is the kind's part of d: FromEvent's, else its payload's
// (decoded by DecodeRecord; decoded here when d did not come through it).
func (s *Spec[K, V]) fromEvent(d *event.Decoded) (V, bool) {
	if s.FromEvent != nil {
		return s.FromEvent(d)
	}
	var zero V
	if s.Payload == nil {
		return zero, false
	}
	for _, p := range d.Payloads {
		if p.Type != s.Payload.Type {
			continue
		}
		if v, ok := p.Value.(V); ok {
			return v, true
		}
		v, err := s.Payload.Decode(d.Envelope, p.Bytes)
		return v, err == nil
	}
	return zero, false
}

// DecodeRecord decodes r (event.DecodeRecord) and each payload of a kind
// of ks in it. A payload whose type no kind of ks has, or one its kind
// refuses, makes the record undecodable (event.ErrUndecodable, with the
// reason): it goes to the dead-letter topic, to be replayed by a build
// that knows it, never dropped unread.
func DecodeRecord(ks []Kind, r *kgo.Record) (event.Decoded, error) {
	d, err := event.DecodeRecord(r)
	if err != nil {
		return d, err
	}
	for i := range d.Payloads {
		p := &d.Payloads[i]
		var k Kind
		for _, c := range ks {
			if t, ok := c.PayloadType(); ok && t == p.Type {
				k = c
				break
			}
		}
		if k == nil {
			return event.Decoded{}, fmt.Errorf("%w: payload type %s is no kind's this build knows", event.ErrUndecodable, p.Type)
		}
		v, err := k.DecodePayload(d.Envelope, p.Bytes)
		if err != nil {
			return event.Decoded{}, fmt.Errorf("%w: invalid %s payload: %v", event.ErrUndecodable, k.Name(), err)
		}
		p.Value = v
	}
	return d, nil
}

func (k kind[K, V]) PayloadType() (event.PayloadType, bool) {
	if k.s.Payload == nil {
		return 0, false
	}
	return k.s.Payload.Type, true
}

func (k kind[K, V]) DecodePayload(e event.RecordEnvelope, b []byte) (any, error) {
	if k.s.Payload == nil {
		return nil, fmt.Errorf("kind %s has no payload of its own", k.s.Name)
	}
	return k.s.Payload.Decode(e, b)
}
