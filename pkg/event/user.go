package event

import (
	"fmt"
	"math"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// userKeyPrefix starts the key of a user-wide event (UserEvent). "u::" has
// two colons, which no "user:channel" key has (a key's ids escape ':',
// receipt.EscapeKeyID), so a user named "u" marking channel "x" ("u:x")
// is never taken for one.
const userKeyPrefix = "u::"

// UserKey is the record key of a user-wide event of user: "u::" and the
// escaped user.
func UserKey(user string) string { return userKeyPrefix + receipt.EscapeKeyID(user) }

// matchesKey reports whether a record key is want, or the key the builds
// before the escape wrote for the same ids (legacy: "" when none could
// have been written), so that the topic's older records replay.
func matchesKey(key []byte, want, legacy string) bool {
	return string(key) == want || (legacy != "" && string(key) == legacy)
}

// legacyUserKey is the key of user's user-wide events before the escape.
func legacyUserKey(user string) string {
	if strings.IndexByte(user, ':') >= 0 {
		return ""
	}
	return userKeyPrefix + user
}

// EncodeErasure builds the user event of an erasure tombstone.
func EncodeErasure(t tombstone.Tombstone) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{Erasure: &t})
}

func encodeUser(d Decoded) (*kgo.Record, error) {
	if d.Settings != nil {
		return encodeSettings(d)
	}
	t := d.Erasure
	ev := &recordv1.UserEvent{
		SchemaVersion:    SchemaVersion,
		UserId:           t.User,
		ErasedGeneration: t.Generation,
		AcceptedAtUnixMs: t.ErasedAtUnixMs,
	}
	v, err := proto.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("marshalling the user event of %s: %w", t.User, err)
	}
	return typed(&kgo.Record{Key: []byte(UserKey(t.User)), Value: v}), nil
}

// decodeUser reads a user-wide event. An event without an erasure (a
// later kind this build does not apply) is refused like any invalid event.
func decodeUser(r *kgo.Record) (Decoded, error) {
	var ev recordv1.UserEvent
	if err := proto.Unmarshal(r.Value, &ev); err != nil {
		return Decoded{}, fmt.Errorf("%w: unmarshalling protobuf: %v", ErrUndecodable, err)
	}
	return decodeUserEvent(r, &ev)
}

// decodeUserEvent validates a user-wide event.
func decodeUserEvent(r *kgo.Record, ev *recordv1.UserEvent) (Decoded, error) {
	if v := ev.GetSchemaVersion(); v != SchemaVersion {
		return Decoded{}, fmt.Errorf("%w: unknown user event schema version %d", ErrUndecodable, v)
	}
	if ev.GetSettings() != nil && ev.GetErasedGeneration() == 0 {
		return decodeSettings(r, ev)
	}
	if ev.GetErasedGeneration() == 0 {
		return Decoded{}, fmt.Errorf("%w: invalid event: a user event without erased_generation", ErrUndecodable)
	}
	t := tombstone.Tombstone{User: ev.GetUserId(), Generation: ev.GetErasedGeneration(), ErasedAtUnixMs: ev.GetAcceptedAtUnixMs()}
	if err := t.Validate(); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	if !matchesKey(r.Key, UserKey(t.User), legacyUserKey(t.User)) {
		return Decoded{}, fmt.Errorf("%w: record key %q does not match user event key %q", ErrUndecodable, r.Key, UserKey(t.User))
	}
	return Decoded{Erasure: &t}, nil
}

// Unstamped is the generation of an event the gateway could not stamp:
// neither Redis nor Postgres told it the user's erasure generation. Any
// negative generation stamps nothing; this one is not the -1 Redis
// answers for a tombstone it does not hold, which Postgres may resolve.
const Unstamped int64 = math.MinInt64

// The field numbers of user_generation and user_generation_stamped in
// ReceiptEvent and UserEvent.
const (
	receiptGenerationField protowire.Number = 11
	receiptStampedField    protowire.Number = 12
	userGenerationField    protowire.Number = 6
	userStampedField       protowire.Number = 7
)

// StampGeneration sets the user_generation of an encoded record in place
// (the envelope's; in a record of an earlier build, a ReceiptEvent's or a
// settings UserEvent's), and marks it stamped: a protobuf scalar field
// appended to a message overrides an earlier one, so the record need not
// be encoded again once the gateway's Redis write has read the
// generation. 0 is a stamp too (known never erased); Unstamped leaves the
// record as is.
func StampGeneration(r *kgo.Record, gen int64) {
	if gen < 0 {
		return
	}
	genField, stampedField := envGenerationField, envStampedField
	switch {
	case peekVersion(r.Value) >= EnvelopeSchemaVersion:
	case strings.HasPrefix(string(r.Key), userKeyPrefix):
		genField, stampedField = userGenerationField, userStampedField
	default:
		genField, stampedField = receiptGenerationField, receiptStampedField
	}
	r.Value = appendStamp(r.Value, genField, stampedField, gen)
}

// appendStamp appends the generation (when above 0, as proto.Marshal
// writes it) and the stamped flag.
func appendStamp(b []byte, genField, stampedField protowire.Number, gen int64) []byte {
	if gen > 0 {
		b = protowire.AppendTag(b, genField, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(gen))
	}
	b = protowire.AppendTag(b, stampedField, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}
