package kinds_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// Each kind's record key of a value is the key of the record it came from
// (the persister finds a rejected row's records by it), for ids whose keys
// are escaped too.
func TestRecordKeyIsTheRecordsKey(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "@alice:example.org", Channel: "!room%1:example.org"}
	st := receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 3}}, UpdatedAtUnixMs: 1}
	m := channel.Join(k, 2, 2, 2)
	ref := thread.Ref{Channel: k.Channel, Root: 3}
	seen := map[string]bool{}
	for _, d := range []event.Decoded{
		{Key: k, Receipt: &st, Membership: &m, Mentions: []int64{3}},
		{Channel: &channel.Head{Channel: k.Channel, Seq: 4}},
		{Channel: &channel.Head{Channel: k.Channel, Seq: 4}, GroupMentions: &channel.GroupMentions{Channel: k.Channel, Mentions: []channel.GroupMention{{Seq: 4, Sender: k.User}}}},
		{Settings: &privacy.Settings{User: k.User, ShareRead: true, VersionMs: 1}},
		{Key: k, Thread: &thread.State{Key: thread.Key{User: k.User, Ref: ref}, Follow: thread.Follow{Following: true, VersionUnixMs: 1}}},
		{ThreadHead: &thread.Head{Ref: ref, Seq: 5, UpdatedAtUnixMs: 1}},
		{Key: k, Notifications: &notification.Register{Key: k, Level: notification.Mentions, VersionUnixMs: 1}},
		{Deletions: &channel.Deletions{Channel: k.Channel, Seqs: []int64{2, 3}, UpdatedAtUnixMs: 1}},
		{Deletions: &channel.Deletions{Channel: k.Channel, Root: 3, Seqs: []int64{2, 3}, UpdatedAtUnixMs: 1}},
	} {
		rec, err := event.EncodeDecoded(d)
		require.NoError(t, err)
		got, err := event.DecodeRecord(rec)
		require.NoError(t, err)
		for _, kind := range kinds.All() {
			v, ok := kind.FromEvent(&got)
			if !ok {
				continue
			}
			seen[kind.Name()] = true
			require.Equal(t, string(rec.Key), kind.RecordKeyOf(kind.KeyOf(v)), kind.Name())
		}
	}
	for _, kind := range kinds.All() {
		if _, own := kind.PayloadType(); own {
			continue // a payload of its own: its folder tests its records
		}
		require.True(t, seen[kind.Name()], "no event carried %s", kind.Name())
	}
}
