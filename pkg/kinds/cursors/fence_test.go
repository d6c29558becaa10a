package cursors_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// fenceStores is a driver on the test Redis, its scripts loaded, and the
// cursors' store on it.
func fenceStores(t *testing.T) (*redisstore.Store, cursors.Store) {
	rdb := redistest.Client(t)
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, s.Load(context.Background()))
	return s, cursors.NewStore(s)
}

// A restore that read Postgres before the user was unloaded after a
// degraded write (a newer fence) does not mark the hash complete: its
// states may lack the degraded write, which the next merge would then
// answer below. One that waited for the fence now set does, alone and
// together with others.
func TestHydrateRefusesAfterAnUnloadItDidNotWaitFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, st := fenceStores(t)
	durable := []receipt.State{mark("u1", "c1", 0, 46, "m46", true)}
	loaded := func(user string) bool {
		_, complete, err := st.Get(ctx, user, []string{"c1"})
		require.NoError(t, err)
		return complete
	}

	// The restore saw no fence; the unload came before its hydrate.
	require.NoError(t, st.UnloadUsers(ctx, []string{"u1", "u2"}, "fence-2"))
	require.ErrorIs(t, st.Hydrate(ctx, "u1", durable, redisstore.Incarnation{}), redisstore.ErrMarkerMoved)
	require.False(t, loaded("u1"), "a restore that did not wait for the unload's fence leaves the hash unloaded")
	res, err := st.HydrateMany(ctx, map[string][]receipt.State{"u2": {mark("u2", "c1", 0, 3, "m3", true)}}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, res["u2"], redisstore.ErrMarkerMoved, "users restored together have no fence to wait for")
	require.False(t, loaded("u2"))

	// A restore that waited for an earlier fence is refused too.
	require.ErrorIs(t, st.HydrateAfterFence(ctx, "u1", durable, redisstore.Incarnation{}, "fence-1"), redisstore.ErrMarkerMoved)
	require.False(t, loaded("u1"))

	// The one that waited for the fence now set restores.
	require.NoError(t, st.HydrateAfterFence(ctx, "u1", durable, redisstore.Incarnation{}, "fence-2"))
	require.True(t, loaded("u1"))
	require.NoError(t, s.ClearUserFence(ctx, "u2", "fence-2"))
	res, err = st.HydrateMany(ctx, map[string][]receipt.State{"u2": {mark("u2", "c1", 0, 3, "m3", true)}}, nil)
	require.NoError(t, err)
	require.NoError(t, res["u2"])
	require.True(t, loaded("u2"))
}

// A flush read the stored values while the user's hash was loaded; the
// user was then unloaded after a degraded write (its fields stay, behind
// that write): the CAS writes nothing and answers not loaded, though the
// field still holds the value it expects, so the mark is merged again
// after a restore instead of answered over a hash without the write.
func TestCASRefusesAHashUnloadedAfterItsValuesWereRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, st := fenceStores(t)
	require.NoError(t, st.Hydrate(ctx, "u1", []receipt.State{mark("u1", "c1", 0, 46, "m46", true)}, redisstore.Incarnation{}))
	mk := mark("u1", "c1", 0, 47, "m47", true)

	var read func() *cursors.MarkValues
	_, err := s.Exec(ctx, func(pipe redis.Pipeliner) { read = st.QueueMarkValues(ctx, pipe, []receipt.Key{mk.Key}) })
	require.NoError(t, err)
	vals := read()
	require.Empty(t, vals.Unloaded(), "loaded when the values were read")
	require.NoError(t, st.UnloadUsers(ctx, []string{"u1"}, "fence-1"))

	res, err := st.MergeMarksFrom(ctx, vals, []receipt.State{mk})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, redisstore.ErrNotLoaded)
	got, _, err := st.Get(ctx, "u1", []string{"c1"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(46), got[0].Read.Position.Seq, "nothing written into the unloaded hash")
}
