package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

func TestThreadEventsRoundTrip(t *testing.T) {
	t.Parallel()
	key := thread.Key{User: "u:1", Ref: thread.Ref{Channel: "c%1", Root: 42}}
	states := []thread.State{
		{Key: key, Cursors: receipt.State{Read: receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: 3}, MessageID: "r3"},
			Delivered:   receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: 3}, MessageID: "r3"},
			PrivateRead: receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: 5}}, DeviceID: "d1", UpdatedAtUnixMs: 1700000000001},
			Follow: thread.Follow{Following: true, VersionUnixMs: 1700000000001}, Mentions: []int64{2, 4}},
		{Key: key, Follow: thread.Follow{VersionUnixMs: 1700000000002}},
		{Key: key, Mentions: []int64{7}},
	}
	for _, st := range states {
		rec, err := event.EncodeThread(st, 3, true)
		require.NoError(t, err)
		require.Equal(t, key.ChannelKey().KafkaKey(), string(rec.Key), "a thread event shares the key of the user's channel events")
		d, err := event.DecodeRecord(rec)
		require.NoError(t, err)
		require.Equal(t, &st, d.Thread)
		require.Nil(t, d.Receipt, "a thread's cursors are not the channel's")
		require.Nil(t, d.Mentions)
		require.Equal(t, key.ChannelKey(), d.Key)
		require.Equal(t, int64(3), d.Generation)
		require.True(t, d.Stamped)
		require.Equal(t, st.Time(), d.AcceptedAt())
		_, err = event.Decode(rec)
		require.ErrorIs(t, err, event.ErrUndecodable, "a thread event carries no channel cursor")
	}

	h := thread.Head{Ref: key.Ref, Seq: 9, MessageID: "r9", UpdatedAtUnixMs: 1700000000003}
	rec, err := event.EncodeThreadHead(h)
	require.NoError(t, err)
	require.Equal(t, receipt.EscapeKeyID("c%1"), string(rec.Key))
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, &h, d.ThreadHead)
	require.Nil(t, d.Channel, "a thread head is not the channel's")
	require.Equal(t, string(rec.Key), d.RecordKey())
}

func TestThreadEventsRefused(t *testing.T) {
	t.Parallel()
	key := thread.Key{User: "u1", Ref: thread.Ref{Channel: "c1", Root: 1}}
	enc := func(ev proto.Message, k string) *kgo.Record {
		v, err := proto.Marshal(ev)
		require.NoError(t, err)
		return &kgo.Record{Key: []byte(k), Value: v}
	}
	ck := key.ChannelKey().KafkaKey()
	for name, rec := range map[string]*kgo.Record{
		"old version": enc(&recordv1.ReceiptEvent{SchemaVersion: 3, UserId: "u1", ChannelId: "c1", ThreadRootSeq: 1,
			Follow: &recordv1.ThreadFollow{Following: true, VersionUnixMs: 1}}, ck),
		"empty": enc(&recordv1.ReceiptEvent{SchemaVersion: 4, UserId: "u1", ChannelId: "c1", ThreadRootSeq: 1}, ck),
		"negative root": enc(&recordv1.ReceiptEvent{SchemaVersion: 4, UserId: "u1", ChannelId: "c1", ThreadRootSeq: -1,
			Follow: &recordv1.ThreadFollow{Following: true, VersionUnixMs: 1}}, ck),
		"membership": enc(&recordv1.ReceiptEvent{SchemaVersion: 4, UserId: "u1", ChannelId: "c1", ThreadRootSeq: 1,
			Follow: &recordv1.ThreadFollow{Following: true, VersionUnixMs: 1}, Membership: &recordv1.Membership{Member: true, VersionUnixMs: 1}}, ck),
		"wrong key": enc(&recordv1.ReceiptEvent{SchemaVersion: 4, UserId: "u1", ChannelId: "c1", ThreadRootSeq: 1,
			Follow: &recordv1.ThreadFollow{Following: true, VersionUnixMs: 1}}, "u1:c2"),
		"head of old version": enc(&recordv1.ChannelEvent{SchemaVersion: 3, ChannelId: "c1", ThreadRootSeq: 1,
			Head: &recordv1.Cursor{Position: &recordv1.Position{Seq: 1}}}, "c1"),
		"head without seq": enc(&recordv1.ChannelEvent{SchemaVersion: 4, ChannelId: "c1", ThreadRootSeq: 1}, "c1"),
	} {
		_, err := event.DecodeRecord(rec)
		require.ErrorIs(t, err, event.ErrUndecodable, name)
	}
}
