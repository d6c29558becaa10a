package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
)

func TestGroupMentionsRoundTrip(t *testing.T) {
	h := channel.Head{Channel: "c1", Seq: 9, UpdatedAtUnixMs: 5}
	gms := []channel.GroupMention{{Seq: 4, Sender: "u1"}, {Seq: 9}}
	rec, err := event.EncodeHeadWithGroupMentions(h, gms)
	require.NoError(t, err)
	rec = legacy(t, rec)
	var ev recordv1.ChannelEvent
	require.NoError(t, proto.Unmarshal(rec.Value, &ev))
	require.Equal(t, uint32(event.GroupMentionSchemaVersion), ev.GetSchemaVersion())
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, h, *d.Channel)
	require.Equal(t, &channel.GroupMentions{Channel: "c1", Mentions: gms}, d.GroupMentions)

	plain, err := event.EncodeHeadWithGroupMentions(h, nil)
	require.NoError(t, err)
	plain = legacy(t, plain)
	require.NoError(t, proto.Unmarshal(plain.Value, &ev))
	require.Equal(t, uint32(event.SchemaVersion), ev.GetSchemaVersion(), "a head alone keeps the old version")
	d, err = event.DecodeRecord(plain)
	require.NoError(t, err)
	require.Nil(t, d.GroupMentions)
}

func TestGroupMentionsRejected(t *testing.T) {
	for name, edit := range map[string]func(*recordv1.ChannelEvent){
		"an old version": func(ev *recordv1.ChannelEvent) { ev.SchemaVersion = event.NotificationSchemaVersion },
		"seq 0":          func(ev *recordv1.ChannelEvent) { ev.GroupMentions[0].Seq = 0 },
		"too many": func(ev *recordv1.ChannelEvent) {
			for i := range channel.MaxGroupMentionsPerEvent {
				ev.GroupMentions = append(ev.GroupMentions, &recordv1.GroupMention{Seq: int64(i + 1)})
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec, err := event.EncodeHeadWithGroupMentions(channel.Head{Channel: "c1", Seq: 9}, []channel.GroupMention{{Seq: 4}})
			require.NoError(t, err)
			rec = legacy(t, rec)
			var ev recordv1.ChannelEvent
			require.NoError(t, proto.Unmarshal(rec.Value, &ev))
			edit(&ev)
			rec.Value, err = proto.Marshal(&ev)
			require.NoError(t, err)
			_, err = event.DecodeRecord(rec)
			require.ErrorIs(t, err, event.ErrUndecodable)
		})
	}
}
