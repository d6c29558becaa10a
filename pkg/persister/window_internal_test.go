package persister

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// A window sorted ahead (by the poller) is sorted again once it changes:
// records added after the sort, and users an erasure took out, show in
// what the writer gets.
func TestWindowSortedAheadFollowsChanges(t *testing.T) {
	t.Parallel()
	mark := func(user string, seq int64) *kgo.Record {
		r, err := event.Encode(receipt.State{
			Key:  receipt.Key{User: user, Channel: "c"},
			Read: receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m"}, DeviceID: "d",
		})
		require.NoError(t, err)
		return r
	}
	cursors := func(w *window) map[string]int64 {
		rows := w.cursorRows()
		require.IsIncreasing(t, keysOf(rows))
		out := map[string]int64{}
		for _, r := range rows {
			out[r.Key.User] = r.Read.Position.Seq
		}
		return out
	}

	w := newWindow(0, kinds.All(), &kind.Env{MentionCap: 10})
	w.add([]*kgo.Record{mark("u2", 5), mark("u1", 3)})
	w.sort()
	require.Equal(t, map[string]int64{"u1": 3, "u2": 5}, cursors(w))

	w.add([]*kgo.Record{mark("u0", 1), mark("u1", 9)})
	require.Equal(t, map[string]int64{"u0": 1, "u1": 9, "u2": 5}, cursors(w), "records added after the sort")

	w.sort()
	require.Equal(t, 2, w.dropErased(tombstone.Set{"u1": {User: "u1", Generation: 1}}))
	require.Equal(t, map[string]int64{"u0": 1, "u2": 5}, cursors(w), "an erased user's rows after the sort")
}

func keysOf(rows []receipt.State) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key.KafkaKey()
	}
	return out
}

// An erased user whose id holds ':' (a Matrix id, escaped in record keys)
// keeps the events that follow the erasure: the window finds the user's
// records by their keys.
func TestWindowDropErasedWithMatrixIDs(t *testing.T) {
	t.Parallel()
	const user, gen = "@gone:example.org", 1_000
	mark := func(ch string, seq, at, stamp int64) *kgo.Record {
		st := receipt.State{Key: receipt.Key{User: user, Channel: ch},
			Read: receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "$m:x"}, UpdatedAtUnixMs: at}
		r, err := event.EncodeDecoded(event.Decoded{Key: st.Key, Receipt: &st, Generation: stamp, Stamped: stamp > 0})
		require.NoError(t, err)
		return r
	}
	w := newWindow(0, kinds.All(), &kind.Env{MentionCap: 10})
	w.add([]*kgo.Record{mark("!before:x", 3, 10, 1), mark("!after:x", 5, 2_000, gen)})
	require.Equal(t, 1, w.dropErased(tombstone.Set{user: {User: user, Generation: gen, ErasedAtUnixMs: gen}}))
	rows := w.cursorRows()
	require.Len(t, rows, 1)
	require.Equal(t, receipt.Key{User: user, Channel: "!after:x"}, rows[0].Key)

	for key, want := range map[string]string{
		"@gone%3Aexample.org:!a%3Ab": user,
		"u::@gone%3Aexample.org":     user,
		"u::50%25":                   "50%",
	} {
		got, ok := recordUser(key)
		require.True(t, ok, key)
		require.Equal(t, want, got, key)
	}
	_, ok := recordUser("!room%3Ax")
	require.False(t, ok, "a channel event's key names no user")
}
