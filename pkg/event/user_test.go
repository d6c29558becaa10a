package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

func TestErasureRoundTrip(t *testing.T) {
	t.Parallel()
	ts := tombstone.Tombstone{User: "u1", Generation: 1700000000123, ErasedAtUnixMs: 1700000000123}
	rec, err := event.EncodeErasure(ts)
	require.NoError(t, err)
	require.Equal(t, "u::u1", string(rec.Key))
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, &ts, d.Erasure)
	require.Equal(t, "u1", d.User())
	require.Equal(t, "u::u1", d.RecordKey())
	_, err = event.Decode(rec)
	require.ErrorIs(t, err, event.ErrUndecodable, "an erasure carries no cursor")

	// A user named "u" marking channel "x" is still a cursor event.
	st := sample()
	st.Key = receipt.Key{User: "u", Channel: "x"}
	mark, err := event.Encode(st)
	require.NoError(t, err)
	got, err := event.DecodeRecord(mark)
	require.NoError(t, err)
	require.Nil(t, got.Erasure)
	require.Equal(t, st, *got.Receipt)
}

func TestErasureRejects(t *testing.T) {
	t.Parallel()
	val := func(f func(*recordv1.UserEvent)) []byte {
		ev := &recordv1.UserEvent{SchemaVersion: event.SchemaVersion, UserId: "u1", ErasedGeneration: 5, AcceptedAtUnixMs: 5}
		f(ev)
		b, _ := proto.Marshal(ev)
		return b
	}
	for name, tc := range map[string]struct {
		key  string
		val  []byte
		want string
	}{
		"no generation":  {"u::u1", val(func(ev *recordv1.UserEvent) { ev.ErasedGeneration = 0 }), "without erased_generation"},
		"negative":       {"u::u1", val(func(ev *recordv1.UserEvent) { ev.ErasedGeneration = -1 }), "erased_generation"},
		"empty user":     {"u::", val(func(ev *recordv1.UserEvent) { ev.UserId = "" }), "user_id: is required"},
		"oversized user": {"u::" + string(make([]byte, 129)), val(func(ev *recordv1.UserEvent) { ev.UserId = string(make([]byte, 129)) }), "user_id"},
		"key mismatch":   {"u::u2", val(func(*recordv1.UserEvent) {}), "does not match"},
		"old version":    {"u::u1", val(func(ev *recordv1.UserEvent) { ev.SchemaVersion = 2 }), "schema version 2"},
		"not protobuf":   {"u::u1", []byte{0xff, 0xff}, "unmarshalling"},
		"negative time":  {"u::u1", val(func(ev *recordv1.UserEvent) { ev.AcceptedAtUnixMs = -1 }), "accepted_at_unix_ms"},
		"empty settings": {"u::u1", val(func(ev *recordv1.UserEvent) { ev.ErasedGeneration = 0; ev.Settings = &recordv1.Settings{} }), "settings.version_unix_ms must be between 1 and"},
	} {
		_, err := event.DecodeRecord(&kgo.Record{Key: []byte(tc.key), Value: tc.val})
		require.ErrorIs(t, err, event.ErrUndecodable, name)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// The gateway stamps the generation its Redis merge read onto the record
// it already encoded; every kind of user event carries it through, 0
// (known never erased) apart from no stamp at all.
func TestStampGeneration(t *testing.T) {
	t.Parallel()
	rec, err := event.Encode(sample())
	require.NoError(t, err)
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.False(t, d.Stamped, "not stamped")
	event.StampGeneration(rec, event.Unstamped)
	d, err = event.DecodeRecord(rec)
	require.NoError(t, err)
	require.False(t, d.Stamped, "Unstamped stamps nothing")
	event.StampGeneration(rec, 0)
	d, err = event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Zero(t, d.Generation)
	require.True(t, d.Stamped, "0 is a stamp: never erased")
	event.StampGeneration(rec, 7)
	event.StampGeneration(rec, 1700000000999)
	d, err = event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, int64(1700000000999), d.Generation, "the last stamp wins")
	require.Equal(t, sample(), *d.Receipt, "the rest is untouched")

	settings, err := event.EncodeSettings(privacy.Settings{User: "u", ShareRead: true, VersionMs: 5})
	require.NoError(t, err)
	event.StampGeneration(settings, 0)
	d, err = event.DecodeRecord(settings)
	require.NoError(t, err)
	require.True(t, d.Stamped, "a settings event is stamped too")
	require.Zero(t, d.Generation)
	event.StampGeneration(settings, 12)
	d, err = event.DecodeRecord(settings)
	require.NoError(t, err)
	require.Equal(t, int64(12), d.Generation)
	require.Equal(t, privacy.Settings{User: "u", ShareRead: true, VersionMs: 5}, *d.Settings)

	k := receipt.Key{User: "u", Channel: "c"}
	for _, in := range []event.Decoded{
		{Key: k, Mentions: []int64{3}, AcceptedAtUnixMs: 99, Generation: 4, Stamped: true},
		{Key: k, Mentions: []int64{3}, AcceptedAtUnixMs: 99, Stamped: true},
		{Key: k, Mentions: []int64{3}, AcceptedAtUnixMs: 99},
		{Key: k, Membership: &channel.Membership{Key: k, VersionSeq: 2, VersionUnixMs: 9}, Generation: 4, Stamped: true},
		{Settings: &privacy.Settings{User: "u", VersionMs: 9}, AcceptedAtUnixMs: 9, Generation: 4, Stamped: true},
	} {
		r, err := event.EncodeDecoded(in)
		require.NoError(t, err)
		got, err := event.DecodeRecord(r)
		require.NoError(t, err)
		require.Equal(t, in, fields(got))
	}
	require.Equal(t, int64(99), event.Decoded{Key: k, Mentions: []int64{3}, AcceptedAtUnixMs: 99}.AcceptedAt())
	require.Equal(t, int64(9), event.Decoded{Key: k, Membership: &channel.Membership{Key: k, VersionUnixMs: 9}}.AcceptedAt())
	require.Equal(t, int64(1700000000000), event.Decoded{Key: k, Receipt: new(sample())}.AcceptedAt())
}
