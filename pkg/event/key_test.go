package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// TestKeysEscapeIDs: every kind of event keys its ids escaped (':' as
// "%3A", '%' as "%25"), so a Matrix id keeps the key's shape, and the
// decoded event carries the ids as they are.
func TestKeysEscapeIDs(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "@alice:example.org", Channel: "!room%1:example.org"}
	st := receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 3}, MessageID: "$ev:example.org"},
		DeviceID: "dev:1", UpdatedAtUnixMs: 5}
	st.Delivered = st.Read
	m := channel.Join(k, 4, 5, 4)
	cases := []struct {
		d   event.Decoded
		key string
	}{
		{event.Decoded{Key: k, Receipt: &st}, "@alice%3Aexample.org:!room%251%3Aexample.org"},
		{event.Decoded{Key: k, Membership: &m}, "@alice%3Aexample.org:!room%251%3Aexample.org"},
		{event.Decoded{Key: k, Mentions: []int64{7}, AcceptedAtUnixMs: 5}, "@alice%3Aexample.org:!room%251%3Aexample.org"},
		{event.Decoded{Channel: &channel.Head{Channel: k.Channel, Seq: 9, MessageID: "$m:x"}}, "!room%251%3Aexample.org"},
		{event.Decoded{Erasure: &tombstone.Tombstone{User: k.User, Generation: 2, ErasedAtUnixMs: 2}}, "u::@alice%3Aexample.org"},
		{event.Decoded{Settings: &privacy.Settings{User: k.User, ShareRead: true, VersionMs: 3}}, "u::@alice%3Aexample.org"},
	}
	for _, c := range cases {
		rec, err := event.EncodeDecoded(c.d)
		require.NoError(t, err)
		require.Equal(t, c.key, string(rec.Key))
		require.Equal(t, c.key, c.d.RecordKey())
		got, err := event.DecodeRecord(rec)
		require.NoError(t, err, c.key)
		if got.Channel != nil {
			require.Equal(t, k.Channel, got.Channel.Channel)
		} else {
			require.Equal(t, k.User, got.User())
		}
		// The key with the ids as they are is no key of these ids: it
		// holds raw ':'s, which no build ever wrote.
		_, err = event.DecodeRecord(&kgo.Record{Key: []byte(c.key + "x"), Value: rec.Value})
		require.ErrorIs(t, err, event.ErrUndecodable)
	}
	recs := event.EncodeReceipts([]receipt.State{st}, []int64{-1}, "t")
	require.Equal(t, "@alice%3Aexample.org:!room%251%3Aexample.org", string(recs[0].Key), "the batch encoder escapes too")
	got, err := event.Decode(recs[0])
	require.NoError(t, err)
	require.Equal(t, st, got)
}

// TestLegacyKeysReplay: a record written before the escape keyed its ids
// as they are; ids could hold '%' then (never ':'), and such records still
// decode, from either spelling of the key.
func TestLegacyKeysReplay(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "50%off", Channel: "a%3Ab"}
	st := receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 3}, MessageID: "m%"}, UpdatedAtUnixMs: 5}
	st.Delivered = st.Read
	rec, err := event.Encode(st)
	require.NoError(t, err)
	rec = legacy(t, rec)
	require.Equal(t, "50%25off:a%253Ab", string(rec.Key))
	for _, key := range []string{"50%off:a%3Ab", "50%25off:a%253Ab"} {
		got, err := event.Decode(&kgo.Record{Key: []byte(key), Value: rec.Value})
		require.NoError(t, err, key)
		require.Equal(t, st, got, "the ids come from the value, whatever the key's spelling")
	}
	// A key of other ids is still refused: "50%off:a:b" would split
	// elsewhere, and the unescaped reading of the legacy key is other ids.
	for _, key := range []string{"50%off:a:b", "50%off:a%3ab", "50off:a%3Ab"} {
		_, err := event.Decode(&kgo.Record{Key: []byte(key), Value: rec.Value})
		require.ErrorIs(t, err, event.ErrUndecodable, key)
	}

	head, err := event.EncodeHead(channel.Head{Channel: "c%1", Seq: 4})
	require.NoError(t, err)
	head = legacy(t, head)
	require.Equal(t, "c%251", string(head.Key))
	got, err := event.DecodeRecord(&kgo.Record{Key: []byte("c%1"), Value: head.Value})
	require.NoError(t, err, "a legacy channel event")
	require.Equal(t, "c%1", got.Channel.Channel)

	erase, err := event.EncodeErasure(tombstone.Tombstone{User: "u%", Generation: 3, ErasedAtUnixMs: 3})
	require.NoError(t, err)
	erase = legacy(t, erase)
	require.Equal(t, "u::u%25", string(erase.Key))
	got, err = event.DecodeRecord(&kgo.Record{Key: []byte("u::u%"), Value: erase.Value})
	require.NoError(t, err, "a legacy user-wide event")
	require.Equal(t, "u%", got.Erasure.User)
}
