package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
)

func TestDeletionsEventRoundTrip(t *testing.T) {
	t.Parallel()
	del := channel.Deletions{Channel: "c:1", Seqs: []int64{7, 9}, UpdatedAtUnixMs: 42}
	rec, err := event.EncodeDecoded(event.Decoded{Deletions: &del})
	require.NoError(t, err)
	require.Equal(t, "c%3A1", string(rec.Key))
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, &del, d.Deletions)
	require.Nil(t, d.Channel)
	require.Equal(t, string(rec.Key), d.RecordKey())

	rec = legacy(t, rec)
	var ev recordv1.ChannelEvent
	require.NoError(t, proto.Unmarshal(rec.Value, &ev))
	require.Equal(t, uint32(event.DeletionSchemaVersion), ev.GetSchemaVersion())
	for name, corrupt := range map[string]func(*recordv1.ChannelEvent){
		"an old version": func(ev *recordv1.ChannelEvent) { ev.SchemaVersion = event.NotificationSchemaVersion },
		"a zero seq":     func(ev *recordv1.ChannelEvent) { ev.DeletedSeqs = []int64{0} },
		"with a head": func(ev *recordv1.ChannelEvent) {
			ev.Head = &recordv1.Cursor{Position: &recordv1.Position{Seq: 3}}
		},
		"too many":      func(ev *recordv1.ChannelEvent) { ev.DeletedSeqs = make([]int64, channel.MaxDeletedSeqs+1) },
		"other channel": func(ev *recordv1.ChannelEvent) { ev.ChannelId = "c2" },
	} {
		bad := proto.Clone(&ev).(*recordv1.ChannelEvent)
		corrupt(bad)
		v, err := proto.Marshal(bad)
		require.NoError(t, err)
		badRec := *rec
		badRec.Value = v
		_, err = event.DecodeRecord(&badRec)
		require.ErrorIs(t, err, event.ErrUndecodable, name)
	}
}

// A thread's deleted replies travel as the channel's do, with the root
// and version 8; a version before 8 with a root is refused, never read
// as a thread head.
func TestThreadDeletionsEventRoundTrip(t *testing.T) {
	t.Parallel()
	del := channel.Deletions{Channel: "c:1", Root: 5, Seqs: []int64{2, 3}, UpdatedAtUnixMs: 42}
	rec, err := event.EncodeDecoded(event.Decoded{Deletions: &del})
	require.NoError(t, err)
	require.Equal(t, "c%3A1", string(rec.Key), "the channel's partition")
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, &del, d.Deletions)
	require.Nil(t, d.ThreadHead)

	rec = legacy(t, rec)
	var ev recordv1.ChannelEvent
	require.NoError(t, proto.Unmarshal(rec.Value, &ev))
	require.Equal(t, uint32(event.ThreadDeletionSchemaVersion), ev.GetSchemaVersion())
	require.Equal(t, int64(5), ev.GetThreadRootSeq())
	for name, corrupt := range map[string]func(*recordv1.ChannelEvent){
		"version 6":     func(ev *recordv1.ChannelEvent) { ev.SchemaVersion = event.DeletionSchemaVersion },
		"negative root": func(ev *recordv1.ChannelEvent) { ev.ThreadRootSeq = -1 },
	} {
		bad := proto.Clone(&ev).(*recordv1.ChannelEvent)
		corrupt(bad)
		v, err := proto.Marshal(bad)
		require.NoError(t, err)
		badRec := *rec
		badRec.Value = v
		_, err = event.DecodeRecord(&badRec)
		require.ErrorIs(t, err, event.ErrUndecodable, name)
	}
}
