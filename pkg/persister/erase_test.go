package persister_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
	"github.com/readstate/receipts/pkg/views/readby"
)

// userRowCounts counts a user's rows in every erased table, listing the
// tables that hold some (a kind added later, of which a test writes
// nothing, changes no expectation: an absent table is a count of 0).
func (b *bundle) userRowCounts(user string) map[string]int {
	b.t.Helper()
	out := map[string]int{}
	for _, table := range append(kinds.ErasedTables(), readby.MoveLogTable) {
		var n int
		require.NoError(b.t, b.schema.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE user_id = $1`, user).Scan(&n))
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// An erasure deletes what the persister wrote before it, and every event
// that predates it is dropped whether it comes after the erasure on the
// topic (in flight, a spool replayed late) or in a replay of the whole
// topic; events of the erasure's generation, or accepted well after it,
// are written; other users are untouched.
func TestErasureDropsWhatPredatesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	b.start(b.config(reg))

	const erasedAt = 1_700_000_100_000
	before := int64(erasedAt - 50_000)
	skew := tombstone.ClockSkew.Milliseconds()
	mark := func(user, ch string, seq, acceptedAt, gen int64) *kgo.Record {
		st := state(user, ch, seq, seq)
		st.UpdatedAtUnixMs = acceptedAt
		return encodeAny(t, event.Decoded{Key: st.Key, Receipt: &st, Generation: gen})
	}
	var first []*kgo.Record
	for _, u := range []string{"gone", "kept"} {
		first = append(first, mark(u, "c1", 5, before, 0), mark(u, "c2", 7, before, 0),
			encodeAny(t, event.Decoded{Key: receipt.Key{User: u, Channel: "c1"}, Membership: &channel.Membership{Key: receipt.Key{User: u, Channel: "c1"}, Member: true, VersionSeq: 1, VersionUnixMs: before, JoinSeq: 1}}),
			encodeAny(t, event.Decoded{Key: receipt.Key{User: u, Channel: "c1"}, Mentions: []int64{3}, AcceptedAtUnixMs: before}),
			encodeAny(t, event.Decoded{Settings: &privacy.Settings{User: u, ShareDelivered: true, VersionMs: before}}),
			encodeAny(t, event.Decoded{Key: receipt.Key{User: u, Channel: "c1"}, Notifications: &notification.Register{Key: receipt.Key{User: u, Channel: "c1"}, Level: notification.None, VersionUnixMs: before}}))
	}
	b.produce(b.cl, first...)
	b.requireCommittedToEnd()
	kept := b.userRowCounts("kept")
	require.Equal(t, map[string]int{"read_receipts": 2, "channel_members": 1, "mentions": 1, "user_settings": 1, "channel_notifications": 1}, kept)
	require.Equal(t, kept, b.userRowCounts("gone"))

	erasure := tombstone.Tombstone{User: "gone", Generation: erasedAt, ErasedAtUnixMs: erasedAt}
	second := []*kgo.Record{
		encodeAny(t, event.Decoded{Erasure: &erasure}),
		// in flight: accepted before the erasure (an unstamped mark, one
		// stamped with an older generation, a mention, a membership)
		mark("gone", "c3", 9, erasedAt-10, 0),
		mark("gone", "c4", 9, erasedAt-10, erasedAt-99_999),
		encodeAny(t, event.Decoded{Key: receipt.Key{User: "gone", Channel: "c3"}, Mentions: []int64{4}, AcceptedAtUnixMs: erasedAt - 1}),
		encodeAny(t, event.Decoded{Key: receipt.Key{User: "gone", Channel: "c3"}, Membership: &channel.Membership{Key: receipt.Key{User: "gone", Channel: "c3"}, Member: true, VersionSeq: 2, VersionUnixMs: erasedAt}}),
		encodeAny(t, event.Decoded{Key: receipt.Key{User: "gone", Channel: "c3"}, Notifications: &notification.Register{Key: receipt.Key{User: "gone", Channel: "c3"}, Level: notification.Mentions, VersionUnixMs: erasedAt - 10}}),
		// a settings change accepted before it (a user-wide event, key
		// "u::gone")
		encodeAny(t, event.Decoded{Settings: &privacy.Settings{User: "gone", ShareRead: true, VersionMs: erasedAt - 10}}),
		// after it: stamped with its generation (a gateway clock behind),
		// and unstamped but accepted beyond the clock skew
		mark("gone", "c5", 2, erasedAt-1_000, erasedAt),
		mark("gone", "c6", 3, erasedAt+skew+1, 0),
		// another user's events are never dropped
		mark("kept", "c3", 9, erasedAt-10, 0),
	}
	b.produce(b.cl, second...)
	b.requireCommittedToEnd()

	check := func() {
		t.Helper()
		rows := b.rows()
		var gone []string
		for k := range rows {
			if k.User == "gone" {
				gone = append(gone, k.Channel)
			}
		}
		require.ElementsMatch(t, []string{"c5", "c6"}, gone, "only the events after the erasure are written")
		require.Equal(t, map[string]int{"read_receipts": 2}, b.userRowCounts("gone"))
		require.Equal(t, map[string]int{"read_receipts": 3, "channel_members": 1, "mentions": 1, "user_settings": 1, "channel_notifications": 1}, b.userRowCounts("kept"))
		ts, err := b.schema.Store.Tombstone(context.Background(), "gone")
		require.NoError(t, err)
		require.Equal(t, erasure, ts)
		require.Zero(t, b.dltEnd(), "dropped events are not dead letters")
	}
	check()
	require.Equal(t, 6.0, metric(t, reg, "receipts_persister_erased_events_dropped_total"))

	// A replay of the whole topic (a fresh group's view, or a rewind):
	// the erasure applies no more, and what predates it stays dropped.
	b.produce(b.cl, append(first, second...)...)
	b.requireCommittedToEnd()
	check()
}

// An erasure another process applies (the dlt-reconciler, another
// replica) after a window looked up its tombstones and before its rows
// are written deletes nothing of them: the window sees the erasure clock
// move once its rows are committed, deletes the user's rows again and
// writes back only what follows the erasure.
func TestErasureAppliedElsewhereDuringAWindowIsTakenBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	const erasedAt = 1_700_000_100_000
	erasure := tombstone.Tombstone{User: "raced", Generation: erasedAt, ErasedAtUnixMs: erasedAt}
	var erased atomic.Bool
	b.startWith(b.config(reg), func(p *persister.Persister) {
		p.SetOnTombstones(func(users []string) {
			if slices.Contains(users, "raced") && erased.CompareAndSwap(false, true) {
				_, advanced, err := b.schema.Store.Erase(context.Background(), erasure, kind.PGErasure(kinds.All()).And(readby.MoveLogErasure))
				if err != nil || !advanced {
					t.Errorf("erasing beside the persister: advanced %v, %v", advanced, err)
				}
			}
		})
	})

	mark := func(user, ch string, seq, acceptedAt, gen int64) *kgo.Record {
		st := state(user, ch, seq, seq)
		st.UpdatedAtUnixMs = acceptedAt
		return encodeAny(t, event.Decoded{Key: st.Key, Receipt: &st, Generation: gen})
	}
	before := int64(erasedAt - 10)
	k1 := receipt.Key{User: "raced", Channel: "c1"}
	b.produce(b.cl,
		mark("raced", "c1", 5, before, 0),
		encodeAny(t, event.Decoded{Key: k1, Membership: &channel.Membership{Key: k1, Member: true, VersionSeq: 1, VersionUnixMs: before, JoinSeq: 1}}),
		encodeAny(t, event.Decoded{Key: k1, Mentions: []int64{3}, AcceptedAtUnixMs: before}),
		encodeAny(t, event.Decoded{Settings: &privacy.Settings{User: "raced", ShareDelivered: true, VersionMs: before}}),
		// after the erasure, unstamped (Redis could not answer) and
		// accepted beyond the clock skew: a stamped one would make the
		// window apply the erasure itself (TestAPostErasureMarkAheadOfItsErasureIsKept)
		mark("raced", "c2", 7, erasedAt+tombstone.ClockSkew.Milliseconds()+5, 0),
		mark("kept", "c1", 9, before, 0),
	)
	b.requireCommittedToEnd()
	require.True(t, erased.Load(), "the hook erased the user")

	require.Equal(t, map[string]int{"read_receipts": 1}, b.userRowCounts("raced"))
	rows := b.rows()
	require.Contains(t, rows, receipt.Key{User: "raced", Channel: "c2"}, "the mark after the erasure is written back")
	require.Contains(t, rows, receipt.Key{User: "kept", Channel: "c1"})
	require.Equal(t, 1.0, metric(t, reg, "receipts_persister_erasures_raced_total"))
	require.Equal(t, 4.0, metric(t, reg, "receipts_persister_erased_events_dropped_total"))
	require.Zero(t, b.dltEnd())
}

// A mark accepted after an erasure (stamped with its generation) may reach
// Postgres before the erasure's record does: the erasure's record has the
// user's key ("u::user"), the mark its own, and they travel on different
// partitions. The erasure, applied later, must not delete the mark: the
// persister applies the erasure the stamp names before it writes the
// mark, and the erasure's own record then deletes nothing more.
func TestAPostErasureMarkAheadOfItsErasureIsKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(b.config(prometheus.NewRegistry()))

	const erasedAt = 1_700_000_100_000
	mark := func(ch string, seq, acceptedAt, gen int64) *kgo.Record {
		st := state("late", ch, seq, seq)
		st.UpdatedAtUnixMs = acceptedAt
		return encodeAny(t, event.Decoded{Key: st.Key, Receipt: &st, Generation: gen})
	}
	// Before the erasure: a mark the erasure must delete.
	b.produce(b.cl, mark("c1", 5, erasedAt-50_000, 0))
	b.requireCommittedToEnd()
	require.Equal(t, 1, b.userRowCounts("late")["read_receipts"])

	// After it in Redis, on the topic ahead of the erasure's record (a
	// gateway clock behind the eraser's, too).
	b.produce(b.cl, mark("c2", 7, erasedAt-1_000, erasedAt))
	b.requireCommittedToEnd()
	require.Equal(t, map[string]int{"read_receipts": 1},
		b.userRowCounts("late"), "the erasure the stamp names is applied first: c1 deleted, c2 written")
	erasure := tombstone.Tombstone{User: "late", Generation: erasedAt, ErasedAtUnixMs: erasedAt}
	b.produce(b.cl, encodeAny(t, event.Decoded{Erasure: &erasure}))
	b.requireCommittedToEnd()
	rows := b.rows()
	var late []string
	for k := range rows {
		if k.User == "late" {
			late = append(late, k.Channel)
		}
	}
	require.ElementsMatch(t, []string{"c2"}, late, "the erasure's record deletes nothing written after it")
	ts, err := b.schema.Store.Tombstone(context.Background(), "late")
	require.NoError(t, err)
	require.Equal(t, erasure.Generation, ts.Generation)
	require.Zero(t, b.dltEnd())
}
