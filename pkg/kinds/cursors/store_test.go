package cursors_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

func mark(user, ch string, epoch, seq int64, msg string, read bool) receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: seq}, MessageID: msg}
	s := receipt.State{Key: receipt.Key{User: user, Channel: ch}, Delivered: c, DeviceID: "d", UpdatedAtUnixMs: 5}
	if read {
		s.Read = c
	}
	return s
}

func TestMergeIsMaxRegister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, s.Load(ctx))

	big := int64(math.MaxInt64 - 1) // beyond Lua's exact doubles
	res, err := cursors.NewStore(s).Merge(ctx, []receipt.State{
		mark("u1", "c1", 0, 10, "m10", true),
		mark("u1", "c1", 0, 9, "m9", true),
		mark("u1", "c2", 0, 5, "m5", false),
		mark("u2", "c1", 0, big-1, "a", true),
		mark("u2", "c1", 0, big, "b", true),
		mark("u2", "c1", 0, big-1, "a", true),
	})
	require.NoError(t, err)
	require.True(t, res[0].Advanced)
	require.False(t, res[1].Advanced)
	require.Equal(t, int64(10), res[1].State.Read.Position.Seq)
	require.Equal(t, "m10", res[1].State.Read.MessageID)
	require.Equal(t, int64(0), res[2].State.Read.Position.Seq)
	require.Equal(t, int64(5), res[2].State.Delivered.Position.Seq)
	require.True(t, res[4].Advanced)
	require.False(t, res[5].Advanced)
	require.Equal(t, big, res[5].State.Read.Position.Seq)

	states, complete, err := cursors.NewStore(s).Get(ctx, "u1", nil)
	require.NoError(t, err)
	require.False(t, complete)
	require.Len(t, states, 2)

	// Hydrating with older durable values never undoes a newer write.
	require.NoError(t, cursors.NewStore(s).Hydrate(ctx, "u1", []receipt.State{mark("u1", "c1", 0, 3, "m3", true), mark("u1", "c3", 0, 7, "m7", true)}, redisstore.Incarnation{}))
	states, complete, err = cursors.NewStore(s).Get(ctx, "u1", []string{"c1", "c3", "nope"})
	require.NoError(t, err)
	require.True(t, complete)
	require.Len(t, states, 2)
	require.Equal(t, int64(10), states[0].Read.Position.Seq)
	require.Equal(t, int64(7), states[1].Read.Position.Seq)

	// A read of a higher epoch and a lower seq (an older build's
	// mark-unread): it wins the user's own position only; the public read
	// is the greatest by seq.
	res, err = cursors.NewStore(s).Merge(ctx, []receipt.State{mark("u1", "c1", 1, 2, "m2", true)})
	require.NoError(t, err)
	require.True(t, res[0].Advanced)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 2}, res[0].State.EffectiveRead())
	require.Equal(t, receipt.Position{Seq: 10}, res[0].State.Read.Position)
}
