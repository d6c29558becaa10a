package cursors_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// TestUndecodableFieldSkippedAndCounted: a stored field Go cannot decode
// (here an epoch past int64, which an unbounded mark-unread used to
// write) is skipped and counted by every read of the user — Get and
// GetMany (the unread view's read: its TestUndecodableFieldSkipped) — instead of failing them all; the other channels read as
// ever, and a merge into the field replaces it.
func TestUndecodableFieldSkippedAndCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	bad := prometheus.NewCounter(prometheus.CounterOpts{Name: "undecodable"})
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb), Undecodable: bad})
	require.NoError(t, s.Load(ctx))
	cursors.Restored(t, cursors.NewStore(s), "u")
	_, err := cursors.NewStore(s).Merge(ctx, []receipt.State{mark("u", "good", 0, 7, "m7", true)})
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, cursors.NewStore(s).RedisKey("u"), "bad", "zzzzzzzzzzzz.5 m5 d 0").Err())

	states, _, err := cursors.NewStore(s).Get(ctx, "u", nil)
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, "good", states[0].Key.Channel)
	states, _, err = cursors.NewStore(s).Get(ctx, "u", []string{"bad", "good"})
	require.NoError(t, err)
	require.Len(t, states, 1)
	many, err := cursors.NewStore(s).GetMany(ctx, []cursors.UserChannels{{User: "u"}})
	require.NoError(t, err)
	require.Len(t, many[0].States, 1)
	require.Equal(t, 3.0, testutil.ToFloat64(bad))

	// A mark replaces the undecodable value.
	m := mark("u", "bad", 0, 3, "m3", true)
	m.Read.Position.Epoch = receipt.EpochCurrent
	res, err := cursors.NewStore(s).MergeMarks(ctx, []receipt.State{m})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	states, _, err = cursors.NewStore(s).Get(ctx, "u", []string{"bad"})
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, receipt.Position{Seq: 3}, states[0].Read.Position)
}

// TestMarkUnreadEpochBounded: mark-unread at receipt.MaxEpoch, or on a
// value whose epoch is past it, is refused with receipt.ErrEpochLimit and
// writes nothing: the epoch never overflows the base-62 field.
func TestMarkUnreadEpochBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, s.Load(ctx))
	cursors.Restored(t, cursors.NewStore(s), "u")
	k := receipt.Key{User: "u", Channel: "c"}

	_, err := cursors.NewStore(s).Merge(ctx, []receipt.State{mark("u", "c", receipt.MaxEpoch-1, 9, "m9", true)})
	require.NoError(t, err)
	res, err := cursors.NewStore(s).MarkUnread(ctx, k, 5, receipt.EpochCurrent, "d", 1)
	require.NoError(t, err)
	require.Equal(t, receipt.Position{Epoch: receipt.MaxEpoch, Seq: 4}, res.State.EffectiveRead())
	_, err = cursors.NewStore(s).MarkUnread(ctx, k, 3, receipt.EpochCurrent, "d", 2)
	require.ErrorIs(t, err, receipt.ErrEpochLimit)

	// int64's greatest epoch (written before the bound): no overflow.
	require.NoError(t, rdb.HSet(ctx, cursors.NewStore(s).RedisKey("u"), "c", "AzL8n0Y58m7.9 m9 d 0").Err())
	_, err = cursors.NewStore(s).MarkUnread(ctx, k, 3, receipt.EpochCurrent, "d", 2)
	require.ErrorIs(t, err, receipt.ErrEpochLimit)
	states, _, err := cursors.NewStore(s).Get(ctx, "u", nil)
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, int64(1<<63-1), states[0].Read.Position.Epoch)
}

// TestMergeMarksEpochAheadRefused: a mark whose explicit epoch is ahead of
// the stored read epoch changes nothing and says so (EpochAhead); one at
// the stored epoch applies.
func TestMergeMarksEpochAheadRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, s.Load(ctx))
	cursors.Restored(t, cursors.NewStore(s), "u")
	_, err := cursors.NewStore(s).Merge(ctx, []receipt.State{mark("u", "c", 0, 900, "m900", true)})
	require.NoError(t, err)

	res, err := cursors.NewStore(s).MergeMarks(ctx, []receipt.State{
		mark("u", "c", 5, 1, "m1", true),
		{Key: receipt.Key{User: "u", Channel: "c"}, PrivateRead: receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: 1}}},
		mark("u", "c", 0, 901, "m901", true),
	})
	require.NoError(t, err)
	require.True(t, res[0].EpochAhead)
	require.True(t, res[1].EpochAhead)
	require.False(t, res[0].Advanced)
	require.False(t, res[2].EpochAhead)
	require.True(t, res[2].Advanced)
	states, _, err := cursors.NewStore(s).Get(ctx, "u", nil)
	require.NoError(t, err)
	require.Equal(t, receipt.Position{Seq: 901}, states[0].Read.Position)
}
