package event_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
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
		ev.UserId = "bad:id"
		b, _ := proto.Marshal(ev)
		return b
	}
	noPosition := func() []byte {
		ev := event.ToProto(sample())
		ev.Read, ev.Delivered = nil, nil
		b, _ := proto.Marshal(ev)
		return b
	}
	cases := map[string]*kgo.Record{
		"garbage":         {Key: good.Key, Value: []byte{0xff, 0xff, 0xff, 0x01}},
		"unknown version": {Key: good.Key, Value: withVersion(7)},
		"no version":      {Key: good.Key, Value: withVersion(0)},
		"invalid id":      {Key: []byte("bad:id:c1"), Value: badID()},
		"key mismatch":    {Key: []byte("u2:c1"), Value: good.Value},
		"no position":     {Key: good.Key, Value: noPosition()},
		"too big":         {Key: good.Key, Value: make([]byte, event.MaxValueBytes+1)},
	}
	for name, rec := range cases {
		_, err := event.Decode(rec)
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
		SourceOffset: 1234, Attempt: 1, ReplayedFrom: -1}, event.ParseDeadLetter(dl))

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
	require.Equal(t, event.Envelope{SourcePartition: -1, SourceOffset: -1, ReplayedFrom: -1}, bare)
}

// FuzzDecode: no input may panic the decoder, and whatever it accepts must
// be a valid state that re-encodes to an equivalent record.
func FuzzDecode(f *testing.F) {
	good, _ := event.Encode(sample())
	f.Add(good.Key, good.Value)
	f.Add([]byte("u:c"), []byte{})
	f.Add([]byte("u:c"), []byte{0x08, 0x01})
	ev := &receiptsv1.ReceiptEvent{SchemaVersion: 2, UserId: "u", ChannelId: "c"}
	b, _ := proto.Marshal(ev)
	f.Add([]byte("u:c"), b)
	f.Fuzz(func(t *testing.T, key, value []byte) {
		st, err := event.Decode(&kgo.Record{Key: key, Value: value})
		if err != nil {
			require.ErrorIs(t, err, event.ErrUndecodable)
			return
		}
		require.NoError(t, st.Validate())
		re, err := event.Encode(st)
		require.NoError(t, err)
		again, err := event.Decode(re)
		require.NoError(t, err)
		require.Equal(t, st, again)
	})
}
