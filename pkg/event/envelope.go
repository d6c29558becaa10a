package event

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/receipt"
)

// EnvelopeSchemaVersion is the schema version of a Record, the envelope
// every record of read-receipts this build writes is. Field 1 is the
// schema_version of the earlier messages too (1 … MaxSchemaVersion), so
// builds before the envelope refuse a Record as an unknown version (to the
// dead-letter topic, replayed once they are upgraded) and never misread
// one; roll out the persister and dlt-reconciler before the gateway.
const EnvelopeSchemaVersion = 9

// MaxPayloads bounds the payloads of one record: a record of this build
// carries at most two (a join's membership and cursors, a head and its
// group mentions).
const MaxPayloads = 8

// PayloadType names the message a payload holds (records.proto).
type PayloadType = recordv1.PayloadType

// RecordEnvelope is what every record says besides its payloads: the schema
// version, the state's user and channel ("" where it has none), the thread
// root where it is a thread's, the user's erasure generation and whether
// the gateway read it, and when the gateway accepted the record.
type RecordEnvelope struct {
	Version          uint32
	User             string
	Channel          string
	Root             int64
	Generation       int64
	Stamped          bool
	AcceptedAtUnixMs int64
}

// RecordKey is the record key of an envelope: "user:channel" with both,
// the channel with a channel only, "u::user" with a user only (ids
// escaped, receipt.EscapeKeyID).
func (e RecordEnvelope) RecordKey() string {
	switch {
	case e.User != "" && e.Channel != "":
		return receipt.Key{User: e.User, Channel: e.Channel}.KafkaKey()
	case e.User != "":
		return UserKey(e.User)
	}
	return receipt.EscapeKeyID(e.Channel)
}

// Payload is one kind's part of a record: its type and its message,
// encoded. Decoded keeps the payloads of types this package does not
// decode; the kind of that type decodes them (kind.Spec's Payload) and
// keeps the result in Value.
type Payload struct {
	Type  PayloadType
	Bytes []byte
	// Value is the kind's decoded value, once a kind decoded it.
	Value any `json:"-"`
}

// EncodeEnvelope builds the record of an envelope and its payloads
// (e.Version is set to EnvelopeSchemaVersion): what a kind that encodes
// its own payload produces.
func EncodeEnvelope(e RecordEnvelope, payloads ...Payload) (*kgo.Record, error) {
	if len(payloads) == 0 || len(payloads) > MaxPayloads {
		return nil, fmt.Errorf("encoding the record of %s: %d payloads, want 1 … %d", e.RecordKey(), len(payloads), MaxPayloads)
	}
	key := e.RecordKey()
	size := 48 + len(e.User) + len(e.Channel)
	for _, p := range payloads {
		size += 16 + len(p.Bytes)
	}
	v := appendEnvelope(make([]byte, 0, size), e)
	for _, p := range payloads {
		v = appendPayload(v, p.Type, p.Bytes)
	}
	if len(v) > MaxValueBytes {
		return nil, fmt.Errorf("encoding the record of %s: %d bytes, limit %d", key, len(v), MaxValueBytes)
	}
	return &kgo.Record{Key: []byte(key), Value: v, Headers: recordHeaders}, nil
}

// The field numbers of Record and Payload.
const (
	envVersionField    protowire.Number = 1
	envUserField       protowire.Number = 2
	envChannelField    protowire.Number = 3
	envRootField       protowire.Number = 4
	envGenerationField protowire.Number = 5
	envStampedField    protowire.Number = 6
	envAcceptedField   protowire.Number = 7
	envPayloadField    protowire.Number = 8

	payloadTypeField  protowire.Number = 1
	payloadBytesField protowire.Number = 2
)

// appendEnvelope appends the envelope's fields but its payloads, in field
// order as proto.Marshal writes them (a record stamped later gets its
// generation appended by StampGeneration).
func appendEnvelope(b []byte, e RecordEnvelope) []byte {
	b = protowire.AppendTag(b, envVersionField, protowire.VarintType)
	b = protowire.AppendVarint(b, EnvelopeSchemaVersion)
	b = appendString(b, envUserField, e.User)
	b = appendString(b, envChannelField, e.Channel)
	b = appendInt(b, envRootField, e.Root)
	b = appendInt(b, envGenerationField, e.Generation)
	if e.Stamped {
		b = protowire.AppendTag(b, envStampedField, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return appendInt(b, envAcceptedField, e.AcceptedAtUnixMs)
}

// appendPayload appends one Payload field holding msg (encoded).
func appendPayload(b []byte, t PayloadType, msg []byte) []byte {
	n := 1 + protowire.SizeVarint(uint64(t))
	if len(msg) > 0 {
		n += 1 + protowire.SizeBytes(len(msg))
	}
	b = protowire.AppendTag(b, envPayloadField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, payloadTypeField, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(t))
	if len(msg) == 0 {
		return b // an empty message, as proto.Marshal leaves it out
	}
	b = protowire.AppendTag(b, payloadBytesField, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// peekVersion reads a value's schema_version when it is its first field
// (every build writes it first), else 0.
func peekVersion(v []byte) uint32 {
	num, typ, n := protowire.ConsumeTag(v)
	if n < 0 || num != envVersionField || typ != protowire.VarintType {
		return 0
	}
	x, m := protowire.ConsumeVarint(v[n:])
	if m < 0 || x > 1<<32-1 {
		return 0
	}
	return uint32(x)
}

// rawPayload is a payload's place in a value, before its kind decodes it.
type rawPayload struct {
	typ   PayloadType
	bytes []byte
}

// parseEnvelope reads a Record: the envelope, and its payloads in the
// order they came (at most MaxPayloads, one of each type) into ps.
// Fields it does not name are returned as unknown. A known field of
// another wire type, a repeated payload type or a malformed field is an
// error.
func parseEnvelope(v []byte, ps *[MaxPayloads]rawPayload) (e RecordEnvelope, n int, unknown []byte, err error) {
	for b := v; len(b) > 0; {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return e, 0, nil, fmt.Errorf("%w: malformed record: %v", ErrUndecodable, protowire.ParseError(tn))
		}
		field := b
		b = b[tn:]
		want := protowire.VarintType
		if num == envUserField || num == envChannelField || num == envPayloadField {
			want = protowire.BytesType
		}
		if num < envVersionField || num > envPayloadField {
			fn := protowire.ConsumeFieldValue(num, typ, b)
			if fn < 0 {
				return e, 0, nil, fmt.Errorf("%w: malformed record: field %d: %v", ErrUndecodable, num, protowire.ParseError(fn))
			}
			unknown = append(unknown, field[:tn+fn]...)
			b = b[fn:]
			continue
		}
		if typ != want {
			return e, 0, nil, fmt.Errorf("%w: malformed record: field %d has wire type %d", ErrUndecodable, num, typ)
		}
		if want == protowire.BytesType {
			s, sn := protowire.ConsumeBytes(b)
			if sn < 0 {
				return e, 0, nil, fmt.Errorf("%w: malformed record: field %d: %v", ErrUndecodable, num, protowire.ParseError(sn))
			}
			b = b[sn:]
			switch num {
			case envUserField:
				e.User = string(s)
			case envChannelField:
				e.Channel = string(s)
			default:
				if n == MaxPayloads {
					return e, 0, nil, fmt.Errorf("%w: a record of more than %d payloads", ErrUndecodable, MaxPayloads)
				}
				p, err := parsePayload(s)
				if err != nil {
					return e, 0, nil, err
				}
				for _, q := range ps[:n] {
					if q.typ == p.typ {
						return e, 0, nil, fmt.Errorf("%w: two payloads of type %s", ErrUndecodable, p.typ)
					}
				}
				ps[n] = p
				n++
			}
			continue
		}
		x, xn := protowire.ConsumeVarint(b)
		if xn < 0 {
			return e, 0, nil, fmt.Errorf("%w: malformed record: field %d: %v", ErrUndecodable, num, protowire.ParseError(xn))
		}
		b = b[xn:]
		switch num {
		case envVersionField:
			e.Version = uint32(x)
			if x > 1<<32-1 {
				e.Version = 1<<32 - 1
			}
		case envRootField:
			e.Root = int64(x)
		case envGenerationField:
			e.Generation = int64(x)
		case envStampedField:
			e.Stamped = x != 0
		case envAcceptedField:
			e.AcceptedAtUnixMs = int64(x)
		}
	}
	return e, n, unknown, nil
}

// parsePayload reads a Payload message; fields it does not name are
// skipped (a later build's additions).
func parsePayload(v []byte) (rawPayload, error) {
	var p rawPayload
	for b := v; len(b) > 0; {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return p, fmt.Errorf("%w: malformed payload: %v", ErrUndecodable, protowire.ParseError(tn))
		}
		b = b[tn:]
		switch {
		case num == payloadTypeField && typ == protowire.VarintType:
			x, xn := protowire.ConsumeVarint(b)
			if xn < 0 || x > 1<<31-1 {
				return p, fmt.Errorf("%w: malformed payload type", ErrUndecodable)
			}
			p.typ, b = PayloadType(x), b[xn:]
		case num == payloadBytesField && typ == protowire.BytesType:
			s, sn := protowire.ConsumeBytes(b)
			if sn < 0 {
				return p, fmt.Errorf("%w: malformed payload: %v", ErrUndecodable, protowire.ParseError(sn))
			}
			p.bytes, b = s, b[sn:]
			if len(s) == 0 {
				p.bytes = nil
			}
		default:
			fn := protowire.ConsumeFieldValue(num, typ, b)
			if fn < 0 {
				return p, fmt.Errorf("%w: malformed payload: field %d: %v", ErrUndecodable, num, protowire.ParseError(fn))
			}
			b = b[fn:]
		}
	}
	if p.typ == recordv1.PayloadType_PAYLOAD_TYPE_UNSPECIFIED {
		return p, fmt.Errorf("%w: a payload without a type", ErrUndecodable)
	}
	return p, nil
}

// keyMatches reports whether key is the envelope's (RecordKey), without
// building it: this runs for every record.
func (e RecordEnvelope) keyMatches(key []byte) bool {
	var buf [2*receipt.MaxIDLength*3 + 8]byte
	b := buf[:0]
	switch {
	case e.User != "" && e.Channel != "":
		b = receipt.Key{User: e.User, Channel: e.Channel}.AppendKafkaKey(b)
	case e.User != "":
		b = receipt.AppendKeyID(append(b, userKeyPrefix...), e.User)
	default:
		b = receipt.AppendKeyID(b, e.Channel)
	}
	return string(b) == string(key)
}

// validateEnvelope bounds what every envelope carries: at least one id,
// valid where set (checkIDs; the decoders of the built-in payloads check
// them with their values), the root, generation and time within 0 …
// MaxSeq.
func validateEnvelope(e RecordEnvelope, checkIDs bool) error {
	if e.User == "" && e.Channel == "" {
		return fmt.Errorf("%w: invalid event: it names neither a user nor a channel", ErrUndecodable)
	}
	if checkIDs && e.User != "" {
		if err := receipt.ValidateID("user_id", e.User); err != nil {
			return fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
		}
	}
	if checkIDs && e.Channel != "" {
		if err := receipt.ValidateID("channel_id", e.Channel); err != nil {
			return fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
		}
	}
	if e.Root < 0 || e.Root > receipt.MaxSeq {
		return fmt.Errorf("%w: invalid event: thread_root_seq %d outside 0 … %d", ErrUndecodable, e.Root, receipt.MaxSeq)
	}
	return validateStamp(e.Generation, e.AcceptedAtUnixMs)
}
