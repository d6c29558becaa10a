package event_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/tombstone"
)

// payloadMessage is the message a payload type names, by the rule
// records.proto states (PAYLOAD_TYPE_FOO_BAR holds FooBar): what a foreign
// consumer derives with the proto file alone.
func payloadMessage(t *testing.T, typ recordv1.PayloadType) proto.Message {
	t.Helper()
	name := strings.TrimPrefix(typ.String(), "PAYLOAD_TYPE_")
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		b.WriteString(w[:1] + strings.ToLower(w[1:]))
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("receipts.record.v1." + b.String()))
	require.NoError(t, err, typ.String())
	return mt.New().Interface()
}

// Every record this build writes is a Record whose envelope names the
// state's ids, thread root, stamp and time, and whose payloads each read
// whole as the message their type names: a consumer needs records.proto
// and the type header, nothing of this repository.
func TestEveryRecordIsAnEnvelope(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u1", Channel: "c1"}
	st := sample()
	tk := thread.Key{User: "u1", Ref: thread.Ref{Channel: "c1", Root: 3}}
	cases := []struct {
		name  string
		rec   *kgo.Record
		env   event.RecordEnvelope
		types []recordv1.PayloadType
	}{
		{"receipt", must(event.Encode(st)), event.RecordEnvelope{User: "u1", Channel: "c1", AcceptedAtUnixMs: st.UpdatedAtUnixMs},
			[]recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_CURSORS}},
		{"batch", event.EncodeReceipts([]receipt.State{st}, []int64{3}, "t")[0], event.RecordEnvelope{User: "u1", Channel: "c1", Generation: 3, Stamped: true, AcceptedAtUnixMs: st.UpdatedAtUnixMs},
			[]recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_CURSORS}},
		{"head and group mention", must(event.EncodeHeadWithGroupMentions(channel.Head{Channel: "c1", Seq: 9, UpdatedAtUnixMs: 1}, []channel.GroupMention{{Seq: 9, Sender: "u2"}})),
			event.RecordEnvelope{Channel: "c1", AcceptedAtUnixMs: 1}, []recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_HEAD, recordv1.PayloadType_PAYLOAD_TYPE_GROUP_MENTIONS}},
		{"join", must(event.EncodeMembership(channel.Membership{Key: k, Member: true, JoinSeq: 1, VersionSeq: 1, VersionUnixMs: 1}, &st)),
			event.RecordEnvelope{User: "u1", Channel: "c1", AcceptedAtUnixMs: st.UpdatedAtUnixMs}, []recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_CURSORS, recordv1.PayloadType_PAYLOAD_TYPE_MEMBERSHIP}},
		{"mentions", must(event.EncodeMentions(k, []int64{4})), event.RecordEnvelope{User: "u1", Channel: "c1"},
			[]recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_MENTION_SEQS}},
		{"notifications", must(event.EncodeNotifications(notification.Register{Key: k, Level: notification.Mentions, VersionUnixMs: 1}, 2, true)),
			event.RecordEnvelope{User: "u1", Channel: "c1", Generation: 2, Stamped: true, AcceptedAtUnixMs: 1}, []recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_NOTIFICATION_REGISTER}},
		{"settings", must(event.EncodeSettings(privacy.Settings{User: "u1", ShareRead: true, VersionMs: 1})),
			event.RecordEnvelope{User: "u1", AcceptedAtUnixMs: 1}, []recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_SETTINGS}},
		{"erasure", must(event.EncodeErasure(tombstone.Tombstone{User: "u1", Generation: 2, ErasedAtUnixMs: 1})),
			event.RecordEnvelope{User: "u1", AcceptedAtUnixMs: 1}, []recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_ERASURE}},
		{"thread", must(event.EncodeThread(thread.State{Key: tk, Follow: thread.Follow{Following: true, VersionUnixMs: 1}, Mentions: []int64{4}}, 5, true)),
			event.RecordEnvelope{User: "u1", Channel: "c1", Root: 3, Generation: 5, Stamped: true, AcceptedAtUnixMs: 1}, []recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_THREAD_REGISTER}},
		{"thread head", must(event.EncodeThreadHead(thread.Head{Ref: tk.Ref, Seq: 5, UpdatedAtUnixMs: 1})),
			event.RecordEnvelope{Channel: "c1", Root: 3, AcceptedAtUnixMs: 1}, []recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_THREAD_HEAD}},
		{"thread deletions", must(event.EncodeDecoded(event.Decoded{Deletions: &channel.Deletions{Channel: "c1", Root: 3, Seqs: []int64{2}, UpdatedAtUnixMs: 1}})),
			event.RecordEnvelope{Channel: "c1", Root: 3, AcceptedAtUnixMs: 1}, []recordv1.PayloadType{recordv1.PayloadType_PAYLOAD_TYPE_DELETIONS}},
	}
	for _, c := range cases {
		require.Equal(t, event.TypeRecord, event.HeaderValue(c.rec, event.HeaderType), c.name)
		var r recordv1.Record
		require.NoError(t, proto.Unmarshal(c.rec.Value, &r), c.name)
		require.Empty(t, r.ProtoReflect().GetUnknown(), c.name)
		require.Equal(t, uint32(event.EnvelopeSchemaVersion), r.GetSchemaVersion(), c.name)
		var types []recordv1.PayloadType
		for _, p := range r.GetPayloads() {
			types = append(types, p.GetType())
			m := payloadMessage(t, p.GetType())
			require.NoError(t, proto.Unmarshal(p.GetValue(), m), c.name)
			require.Empty(t, m.ProtoReflect().GetUnknown(), "%s: %s leaves fields unread", c.name, p.GetType())
		}
		require.Equal(t, c.types, types, c.name)

		d, err := event.DecodeRecord(c.rec)
		require.NoError(t, err, c.name)
		c.env.Version = event.EnvelopeSchemaVersion
		require.Equal(t, c.env, d.Envelope, c.name)
		require.Equal(t, c.env.User, d.User(), c.name)
		require.Equal(t, string(c.rec.Key), d.RecordKey(), c.name)
		require.Empty(t, d.Payloads, "%s: every payload is one this package decodes", c.name)

		// A consumer that drops headers still reads an envelope.
		_, err = event.DecodeRecord(&kgo.Record{Key: c.rec.Key, Value: c.rec.Value})
		require.NoError(t, err, c.name)
	}
}

// An envelope carrying what its message could not, or whose parts
// contradict one another, is refused with the reason (to the dead-letter
// topic), never read in part.
func TestEnvelopeRefused(t *testing.T) {
	t.Parallel()
	cursors := func() []byte {
		rec := must(event.Encode(sample()))
		var r recordv1.Record
		require.NoError(t, proto.Unmarshal(rec.Value, &r))
		return r.GetPayloads()[0].GetValue()
	}()
	head, err := proto.Marshal(&recordv1.Head{Head: &recordv1.Cursor{Position: &recordv1.Position{Seq: 4}}})
	require.NoError(t, err)
	valid := func() *recordv1.Record {
		return &recordv1.Record{SchemaVersion: event.EnvelopeSchemaVersion, UserId: "u1", ChannelId: "c1", AcceptedAtUnixMs: 5,
			Payloads: []*recordv1.Payload{{Type: recordv1.PayloadType_PAYLOAD_TYPE_CURSORS, Value: cursors}}}
	}
	enc := func(r *recordv1.Record) *kgo.Record {
		v, err := proto.Marshal(r)
		require.NoError(t, err)
		return &kgo.Record{Key: []byte(event.RecordEnvelope{User: r.GetUserId(), Channel: r.GetChannelId()}.RecordKey()), Value: v,
			Headers: []kgo.RecordHeader{{Key: event.HeaderType, Value: []byte(event.TypeRecord)}}}
	}
	_, err = event.DecodeRecord(enc(valid()))
	require.NoError(t, err, "the base case decodes")

	for name, c := range map[string]struct {
		edit   func(r *recordv1.Record)
		reason string
	}{
		"a later version":        {func(r *recordv1.Record) { r.SchemaVersion = event.EnvelopeSchemaVersion + 1 }, "schema version 10"},
		"no payload":             {func(r *recordv1.Record) { r.Payloads = nil }, "no payload"},
		"no ids":                 {func(r *recordv1.Record) { r.UserId, r.ChannelId = "", "" }, "neither a user nor a channel"},
		"a bad user id":          {func(r *recordv1.Record) { r.UserId = "u{1}" }, "user_id"},
		"a negative generation":  {func(r *recordv1.Record) { r.UserGeneration = -3 }, "user_generation"},
		"a time past the bound":  {func(r *recordv1.Record) { r.AcceptedAtUnixMs = receipt.MaxSeq + 1 }, "accepted_at"},
		"a negative root":        {func(r *recordv1.Record) { r.ThreadRootSeq = -1 }, "thread_root_seq"},
		"cursors with a root":    {func(r *recordv1.Record) { r.ThreadRootSeq = 4 }, "thread root 4"},
		"cursors without a user": {func(r *recordv1.Record) { r.UserId = "" }, "PAYLOAD_TYPE_CURSORS"},
		"a head with a user": {func(r *recordv1.Record) {
			r.Payloads = []*recordv1.Payload{{Type: recordv1.PayloadType_PAYLOAD_TYPE_HEAD, Value: head}}
		}, "PAYLOAD_TYPE_HEAD"},
		"a head with cursors": {func(r *recordv1.Record) {
			r.Payloads = append(r.Payloads, &recordv1.Payload{Type: recordv1.PayloadType_PAYLOAD_TYPE_HEAD, Value: head})
		}, "with"},
		"two cursors payloads": {func(r *recordv1.Record) { r.Payloads = append(r.Payloads, r.Payloads[0]) }, "two payloads"},
		"too many payloads": {func(r *recordv1.Record) {
			for i := range event.MaxPayloads {
				r.Payloads = append(r.Payloads, &recordv1.Payload{Type: recordv1.PayloadType(100 + i)})
			}
		}, "more than"},
		"an untyped payload": {func(r *recordv1.Record) {
			r.Payloads = append(r.Payloads, &recordv1.Payload{Value: cursors})
		}, "without a type"},
		"a malformed payload": {func(r *recordv1.Record) { r.Payloads[0].Value = []byte{0x0a, 0x05} }, "malformed"},
		"cursors without a position": {func(r *recordv1.Record) {
			r.Payloads[0].Value = protowire.AppendString(protowire.AppendTag(nil, 4, protowire.BytesType), "ios")
		}, "without a position"},
		"an invalid cursor": {func(r *recordv1.Record) {
			b, err := proto.Marshal(&recordv1.Cursors{Read: &recordv1.Cursor{Position: &recordv1.Position{Seq: receipt.MaxSeq + 1}}})
			require.NoError(t, err)
			r.Payloads[0].Value = b
		}, "read.seq"},
		"an erasure stamped": {func(r *recordv1.Record) {
			b, err := proto.Marshal(&recordv1.Erasure{Generation: 3})
			require.NoError(t, err)
			r.ChannelId, r.UserGeneration, r.Payloads = "", 2, []*recordv1.Payload{{Type: recordv1.PayloadType_PAYLOAD_TYPE_ERASURE, Value: b}}
		}, "not stamped"},
		"deletions without seqs": {func(r *recordv1.Record) {
			r.UserId, r.Payloads = "", []*recordv1.Payload{{Type: recordv1.PayloadType_PAYLOAD_TYPE_DELETIONS}}
		}, "without seqs"},
		"a thread head without a root": {func(r *recordv1.Record) {
			r.UserId, r.Payloads = "", []*recordv1.Payload{{Type: recordv1.PayloadType_PAYLOAD_TYPE_THREAD_HEAD, Value: head}}
		}, "thread root 0"},
	} {
		r := valid()
		c.edit(r)
		_, err := event.DecodeRecord(enc(r))
		require.ErrorIs(t, err, event.ErrUndecodable, name)
		require.ErrorContains(t, err, c.reason, name)
	}

	// A field of the envelope of another wire type than its own.
	rec := enc(valid())
	rec.Value = protowire.AppendVarint(protowire.AppendTag(rec.Value, 2, protowire.VarintType), 1)
	_, err = event.DecodeRecord(rec)
	require.ErrorContains(t, err, "wire type")

	// A key other than the envelope's.
	rec = enc(valid())
	rec.Key = []byte("u1:c2")
	_, err = event.DecodeRecord(rec)
	require.ErrorContains(t, err, "does not match")

	// An envelope under an earlier message's header, or an earlier
	// message under the envelope's.
	rec = enc(valid())
	rec.Headers = []kgo.RecordHeader{{Key: event.HeaderType, Value: []byte(event.TypeReceiptEvent)}}
	_, err = event.DecodeRecord(rec)
	require.ErrorIs(t, err, event.ErrUndecodable)
	old := legacy(t, must(event.Encode(sample())))
	old.Headers = []kgo.RecordHeader{{Key: event.HeaderType, Value: []byte(event.TypeRecord)}}
	_, err = event.DecodeRecord(old)
	require.ErrorIs(t, err, event.ErrUndecodable)
}

// A payload of a type this package does not decode (a later kind's) is
// kept for its kind, with the envelope, and travels on when the record is
// encoded again; so do the envelope's fields this build does not name.
func TestLaterKindsPayloadsKept(t *testing.T) {
	t.Parallel()
	later := event.Payload{Type: 1000, Bytes: []byte{0x08, 0x07}}
	rec, err := event.EncodeEnvelope(event.RecordEnvelope{Channel: "c1", Root: 9, AcceptedAtUnixMs: 3}, later)
	require.NoError(t, err)
	require.Equal(t, "c1", string(rec.Key))
	rec.Value = protowire.AppendVarint(protowire.AppendTag(rec.Value, 20, protowire.VarintType), 1)
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, []event.Payload{later}, d.Payloads)
	require.Equal(t, event.RecordEnvelope{Version: event.EnvelopeSchemaVersion, Channel: "c1", Root: 9, AcceptedAtUnixMs: 3}, d.Envelope)
	require.Nil(t, d.Channel)
	require.Equal(t, "c1", d.RecordKey())
	require.Equal(t, int64(3), d.AcceptedAt())
	again, err := event.EncodeDecoded(d)
	require.NoError(t, err)
	require.Equal(t, rec.Value, again.Value)

	// With a kind this package decodes, in one record.
	k := receipt.Key{User: "u1", Channel: "c1"}
	rec, err = event.EncodeDecoded(event.Decoded{Key: k, Mentions: []int64{4}, Payloads: []event.Payload{later}})
	require.NoError(t, err)
	d, err = event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, d.Mentions)
	require.Equal(t, []event.Payload{later}, d.Payloads)

	_, err = event.EncodeEnvelope(event.RecordEnvelope{Channel: "c1"})
	require.Error(t, err, "a record carries a payload")
}
