package event_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

func sample() receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Epoch: 0, Seq: 42}, MessageID: "m42"}
	return receipt.State{Key: receipt.Key{User: "u1", Channel: "c1"}, Read: c, Delivered: c, DeviceID: "ios-1", UpdatedAtUnixMs: 1700000000000}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	rec, err := event.Encode(sample())
	require.NoError(t, err)
	require.Equal(t, "u1:c1", string(rec.Key))
	got, err := event.Decode(rec)
	require.NoError(t, err)
	require.Equal(t, sample(), got)
}

// Every kind round-trips, a version-1 cursor event (as the previous build
// wrote it) is still read, and the key's shape tells the kinds apart.
func TestKindsRoundTrip(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u1", Channel: "c1"}
	priv := sample()
	priv.PrivateRead = receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: 50}}
	m := channel.Join(k, 40, 1700000000000, 40)
	join := receipt.State{Key: k, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 40}}}
	cases := map[string]event.Decoded{
		"cursors and private read": {Key: k, Receipt: &priv},
		"head":                     {Channel: &channel.Head{Channel: "c1", Seq: 77, MessageID: "m77", UpdatedAtUnixMs: 5}},
		"membership and join read": {Key: k, Membership: &m, Receipt: &join},
		"leave":                    {Key: k, Membership: &channel.Membership{Key: k, VersionSeq: 41, VersionUnixMs: 9}},
		"mentions":                 {Key: k, Mentions: []int64{77, 78}},
	}
	for name, d := range cases {
		rec, err := event.EncodeDecoded(d)
		require.NoError(t, err, name)
		require.Equal(t, d.RecordKey(), string(rec.Key), name)
		got, err := event.DecodeRecord(rec)
		require.NoError(t, err, name)
		require.Equal(t, d, fields(got), name)
	}
	head, err := event.EncodeHead(channel.Head{Channel: "c1", Seq: 3})
	require.NoError(t, err)
	require.Equal(t, "c1", string(head.Key), "a channel event is keyed by the bare channel id")
	_, err = event.Decode(head)
	require.ErrorIs(t, err, event.ErrUndecodable, "Decode reads cursor events only")

	v1 := event.ToProto(sample())
	v1.SchemaVersion = 1
	b, err := proto.Marshal(v1)
	require.NoError(t, err)
	got, err := event.Decode(&kgo.Record{Key: []byte("u1:c1"), Value: b})
	require.NoError(t, err)
	require.Equal(t, sample(), got, "a version-1 event is a plain cursor event")
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	good, err := event.Encode(sample())
	require.NoError(t, err)
	withVersion := func(v uint32) []byte {
		ev := event.ToProto(sample())
		ev.SchemaVersion = v
		b, _ := proto.Marshal(ev)
		return b
	}
	badID := func() []byte {
		ev := event.ToProto(sample())
		ev.UserId = "bad{id"
		b, _ := proto.Marshal(ev)
		return b
	}
	noPosition := func() []byte {
		ev := event.ToProto(sample())
		ev.Read, ev.Delivered = nil, nil
		b, _ := proto.Marshal(ev)
		return b
	}
	v2 := func(f func(*recordv1.ReceiptEvent)) []byte {
		ev := event.ToProto(sample())
		f(ev)
		b, _ := proto.Marshal(ev)
		return b
	}
	ch := func(f func(*recordv1.ChannelEvent)) []byte {
		ev := &recordv1.ChannelEvent{SchemaVersion: 2, ChannelId: "c1", Head: &recordv1.Cursor{Position: &recordv1.Position{Seq: 5}}}
		f(ev)
		b, _ := proto.Marshal(ev)
		return b
	}
	cases := map[string]*kgo.Record{
		"v1 with mentions": {Key: good.Key, Value: v2(func(ev *recordv1.ReceiptEvent) { ev.SchemaVersion = 1; ev.MentionSeqs = []int64{3} })},
		"v1 with private": {Key: good.Key, Value: v2(func(ev *recordv1.ReceiptEvent) {
			ev.SchemaVersion = 1
			ev.PrivateRead = &recordv1.Cursor{Position: &recordv1.Position{Seq: 3}}
		})},
		"negative private": {Key: good.Key, Value: v2(func(ev *recordv1.ReceiptEvent) {
			ev.PrivateRead = &recordv1.Cursor{Position: &recordv1.Position{Epoch: -1, Seq: 3}}
		})},
		"mention seq 0":     {Key: good.Key, Value: v2(func(ev *recordv1.ReceiptEvent) { ev.MentionSeqs = []int64{4, 0} })},
		"too many mentions": {Key: good.Key, Value: v2(func(ev *recordv1.ReceiptEvent) { ev.MentionSeqs = make([]int64, 200) })},
		"membership without version": {Key: good.Key, Value: v2(func(ev *recordv1.ReceiptEvent) {
			ev.Read, ev.Delivered = nil, nil
			ev.Membership = &recordv1.Membership{Member: true}
		})},
		"nothing carried":      {Key: good.Key, Value: v2(func(ev *recordv1.ReceiptEvent) { ev.Read, ev.Delivered = nil, nil })},
		"head seq 0":           {Key: []byte("c1"), Value: ch(func(ev *recordv1.ChannelEvent) { ev.Head = nil })},
		"head with epoch":      {Key: []byte("c1"), Value: ch(func(ev *recordv1.ChannelEvent) { ev.Head.Position.Epoch = 1 })},
		"head key mismatch":    {Key: []byte("c2"), Value: ch(func(*recordv1.ChannelEvent) {})},
		"head v1":              {Key: []byte("c1"), Value: ch(func(ev *recordv1.ChannelEvent) { ev.SchemaVersion = 1 })},
		"head empty key":       {Key: []byte(""), Value: ch(func(ev *recordv1.ChannelEvent) { ev.ChannelId = "" })},
		"user event, bare key": {Key: []byte("u1c1"), Value: good.Value},
		"garbage":              {Key: good.Key, Value: []byte{0xff, 0xff, 0xff, 0x01}},
		"unknown version":      {Key: good.Key, Value: withVersion(event.MaxSchemaVersion + 1)},
		"no version":           {Key: good.Key, Value: withVersion(0)},
		"invalid id":           {Key: []byte("bad{id:c1"), Value: badID()},
		"key mismatch":         {Key: []byte("u2:c1"), Value: good.Value},
		"no position":          {Key: good.Key, Value: noPosition()},
		"too big":              {Key: good.Key, Value: make([]byte, event.MaxValueBytes+1)},
	}
	for name, rec := range cases {
		_, err := event.DecodeRecord(rec)
		require.ErrorIs(t, err, event.ErrUndecodable, name)
	}
}

func TestDeadLetterEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	src := &kgo.Record{Topic: "read-receipts", Partition: 7, Offset: 1234, Key: []byte("k"), Value: []byte("v")}
	dl := event.DeadLetter(src, "read-receipts-dlt", "bad")
	require.Equal(t, "read-receipts-dlt", dl.Topic)
	require.Equal(t, src.Value, dl.Value)
	require.Equal(t, event.Envelope{Reason: "bad", SourceTopic: "read-receipts", SourcePartition: 7,
		SourceOffset: 1234, Attempt: 1, ReplayedFrom: -1, OriginalKeyBytes: -1, OriginalValueBytes: -1}, event.ParseDeadLetter(dl))

	// A dead letter an operator replayed and that failed again counts one
	// more attempt; the reason is bounded.
	replayed := event.Replayed("read-receipts", 42, dl.Key, dl.Value)
	replayed.Headers = append(replayed.Headers, dl.Headers...)
	require.Equal(t, int64(42), event.ParseDeadLetter(replayed).ReplayedFrom)
	again := event.DeadLetter(replayed, "read-receipts-dlt", strings.Repeat("x", 5000))
	env := event.ParseDeadLetter(again)
	require.Equal(t, 2, env.Attempt)
	require.Len(t, env.Reason, 1024)

	// Missing or malformed headers read as absent, never as offset 0.
	bare := event.ParseDeadLetter(&kgo.Record{Headers: []kgo.RecordHeader{{Key: event.HeaderSourceOffset, Value: []byte("-3")}}})
	require.Equal(t, event.Envelope{SourcePartition: -1, SourceOffset: -1, ReplayedFrom: -1, OriginalKeyBytes: -1, OriginalValueBytes: -1}, bare)
}

// TestDeadLetterEnvelopeBounded: a foreign record of any size (here 1 MiB
// of value and 64 KiB of key) makes a dead letter of a few KiB: key and
// value truncated, their sizes and the source offset in headers.
func TestDeadLetterEnvelopeBounded(t *testing.T) {
	t.Parallel()
	src := &kgo.Record{Topic: "read-receipts", Partition: 3, Offset: 99,
		Key: []byte(strings.Repeat("k", 64<<10)), Value: []byte(strings.Repeat("v", 1<<20))}
	dl := event.DeadLetter(src, "read-receipts-dlt", strings.Repeat("r", 5000))
	size := len(dl.Key) + len(dl.Value)
	for _, h := range dl.Headers {
		size += len(h.Key) + len(h.Value)
	}
	require.LessOrEqual(t, size, 8<<10)
	require.Equal(t, src.Value[:event.MaxDeadLetterValueBytes], dl.Value)
	require.Equal(t, src.Key[:event.MaxDeadLetterKeyBytes], dl.Key)
	env := event.ParseDeadLetter(dl)
	require.True(t, env.Truncated())
	require.Equal(t, int64(1<<20), env.OriginalValueBytes)
	require.Equal(t, int64(64<<10), env.OriginalKeyBytes)
	require.Equal(t, int64(99), env.SourceOffset)
	require.Equal(t, int32(3), env.SourcePartition)

	// At the bound nothing is truncated.
	src.Key, src.Value = []byte("u:c"), []byte(strings.Repeat("v", event.MaxDeadLetterValueBytes))
	dl = event.DeadLetter(src, "read-receipts-dlt", "big")
	require.Equal(t, src.Value, dl.Value)
	require.False(t, event.ParseDeadLetter(dl).Truncated())
}

// FuzzDecode: no input may panic the decoder, and whatever it accepts must
// be valid and re-encode to an equivalent record, of either kind.
func FuzzDecode(f *testing.F) {
	good, _ := event.Encode(sample())
	f.Add(good.Key, good.Value)
	k := receipt.Key{User: "u", Channel: "c"}
	m := channel.Join(k, 4, 5, 4)
	for _, d := range []event.Decoded{
		{Channel: &channel.Head{Channel: "c", Seq: 9, MessageID: "m9"}},
		{Key: k, Membership: &m, Receipt: &receipt.State{Key: k, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 4}}}},
		{Key: k, Mentions: []int64{1, 1 << 62}},
		{Erasure: &tombstone.Tombstone{User: "u", Generation: 9, ErasedAtUnixMs: 9}},
	} {
		r, _ := event.EncodeDecoded(d)
		f.Add(r.Key, r.Value)
	}
	mx := receipt.Key{User: "@a:x.org", Channel: "!r%:x.org"}
	for _, d := range []event.Decoded{
		{Key: mx, Mentions: []int64{2}},
		{Channel: &channel.Head{Channel: mx.Channel, Seq: 9}},
		{Erasure: &tombstone.Tombstone{User: mx.User, Generation: 9, ErasedAtUnixMs: 9}},
	} {
		r, _ := event.EncodeDecoded(d)
		f.Add(r.Key, r.Value)
	}
	// Past the bounds: each must be refused.
	huge := int64(receipt.MaxSeq) + 1
	for _, d := range []event.Decoded{
		{Channel: &channel.Head{Channel: "c", Seq: huge}},
		{Key: k, Receipt: &receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: huge}}}},
		{Key: k, Mentions: []int64{huge}},
		{Erasure: &tombstone.Tombstone{User: "u", Generation: math.MaxInt64, ErasedAtUnixMs: 1}},
		{Deletions: &channel.Deletions{Channel: "c", Seqs: []int64{math.MaxInt64}}},
	} {
		if r, err := event.EncodeDecoded(d); err == nil {
			f.Add(r.Key, r.Value)
		}
	}
	f.Add([]byte("u:c"), []byte{})
	f.Add([]byte("u:c"), []byte{0x08, 0x01})
	ev := &recordv1.ReceiptEvent{SchemaVersion: 2, UserId: "u", ChannelId: "c"}
	b, _ := proto.Marshal(ev)
	f.Add([]byte("u:c"), b)
	f.Fuzz(func(t *testing.T, key, value []byte) {
		d, err := event.DecodeRecord(&kgo.Record{Key: key, Value: value})
		if err != nil {
			require.ErrorIs(t, err, event.ErrUndecodable)
			return
		}
		// The key is the ids' escaped one, or the one the builds before
		// the escape wrote (ids without ':', as they are).
		if string(key) != d.RecordKey() {
			require.NotContains(t, d.User(), ":")
			require.Contains(t, string(key), "%", "only an id with '%%' is spelled otherwise")
		}
		if d.Receipt != nil {
			require.NoError(t, d.Receipt.Validate())
		}
		if d.Channel != nil {
			require.NoError(t, d.Channel.Validate())
		}
		requireBounded(t, d)
		re, err := event.EncodeDecoded(d)
		require.NoError(t, err)
		again, err := event.DecodeRecord(re)
		if d.Envelope.Version < event.EnvelopeSchemaVersion {
			// An earlier build's record means the same as an envelope, but
			// for the unknown fields of its message, which have no place
			// in one (a record of them alone has nothing left to carry).
			if d.Extensions != nil {
				if err != nil {
					require.ErrorContains(t, err, "no payload")
					return
				}
				d.Extensions = nil
			}
			require.NoError(t, err)
			require.Equal(t, event.EnvelopeSchemaVersion, int(again.Envelope.Version))
			d.Envelope.Version = again.Envelope.Version
		}
		require.NoError(t, err)
		require.Equal(t, d, again)
		if d.Receipt != nil {
			st, err := event.Decode(re)
			require.NoError(t, err)
			require.Equal(t, *d.Receipt, st)
		}
	})
}

// requireBounded holds a decoded record to the bounds every store relies
// on: seqs, heads, positions, versions and times 0 … receipt.MaxSeq
// (exact in Lua's doubles and in JavaScript).
func requireBounded(t *testing.T, d event.Decoded) {
	t.Helper()
	in := func(what string, v int64) {
		require.GreaterOrEqual(t, v, int64(0), what)
		require.LessOrEqual(t, v, receipt.MaxSeq, what)
	}
	in("generation", d.Generation)
	in("accepted_at", d.AcceptedAtUnixMs)
	cursors := func(st receipt.State) {
		for _, c := range []receipt.Cursor{st.Read, st.PrivateRead, st.Delivered} {
			in("seq", c.Position.Seq)
			require.LessOrEqual(t, c.Position.Epoch, receipt.MaxEpoch)
		}
		in("updated_at", st.UpdatedAtUnixMs)
	}
	if d.Receipt != nil {
		cursors(*d.Receipt)
	}
	if d.Channel != nil {
		in("head", d.Channel.Seq)
	}
	for _, m := range d.Mentions {
		in("mention", m)
	}
	if d.Membership != nil {
		in("version_seq", d.Membership.VersionSeq)
		in("join_seq", d.Membership.JoinSeq)
		in("version_ms", d.Membership.VersionUnixMs)
	}
	if d.Erasure != nil {
		in("erased_generation", d.Erasure.Generation)
	}
	if d.Deletions != nil {
		for _, s := range d.Deletions.Seqs {
			in("deleted", s)
		}
	}
	if d.GroupMentions != nil {
		for _, m := range d.GroupMentions.Mentions {
			in("group mention", m.Seq)
		}
	}
	if d.Thread != nil {
		cursors(d.Thread.Cursors)
		in("root", d.Thread.Key.Ref.Root)
		in("follow", d.Thread.Follow.VersionUnixMs)
		for _, m := range d.Thread.Mentions {
			in("thread mention", m)
		}
	}
	if d.ThreadHead != nil {
		in("thread head", d.ThreadHead.Seq)
	}
	if d.Notifications != nil {
		in("muted_until", d.Notifications.MutedUntilUnixMs)
		in("notifications version", d.Notifications.VersionUnixMs)
	}
	if d.Settings != nil {
		in("settings version", d.Settings.VersionMs)
	}
}
