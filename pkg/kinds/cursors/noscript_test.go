package cursors_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// After Redis lost its script cache (SCRIPT FLUSH; a restart does the same),
// Hydrate and Merge still succeed: they load the scripts again and retry,
// and the merge still keeps the max. SCRIPT FLUSH is server-wide, so the
// test makes one call; every user of these scripts reloads them on NOSCRIPT.
func TestMergeAndHydrateReloadScriptsAfterScriptFlush(t *testing.T) {
	// Not parallel: the flush is server-wide, and the package's parallel
	// tests count round trips that a reload would add to.
	ctx := context.Background()
	rdb := redistest.Client(t)
	log := &cursors.CmdLog{}
	rdb.AddHook(log)
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, s.Load(ctx))
	_, err := cursors.NewStore(s).Merge(ctx, []receipt.State{mark("u1", "c1", 0, 5, "m5", true)})
	require.NoError(t, err)

	// More states than one hydrate chunk, so both hydrate scripts run.
	var durable []receipt.State
	for i := range 300 {
		durable = append(durable, mark("u2", fmt.Sprintf("c%03d", i), 0, int64(i+1), "m", true))
	}

	log.Reset()
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	require.NoError(t, cursors.NewStore(s).Hydrate(ctx, "u2", durable, redisstore.Incarnation{}), "hydrate after SCRIPT FLUSH")
	res, err := cursors.NewStore(s).Merge(ctx, []receipt.State{
		mark("u1", "c1", 0, 3, "m3", true), // stale: the stored 5 stays
		mark("u1", "c2", 0, 2, "m2", true),
		mark("u1", "c1", 0, 9, "m9", false), // delivered ahead of read
	})
	require.NoError(t, err, "merge after SCRIPT FLUSH")
	t.Logf("commands after the flush: %q", log.Reset())
	require.Len(t, res, 3)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	require.False(t, res[0].Advanced)
	require.Equal(t, receipt.Position{Seq: 5}, res[0].State.Read.Position)
	require.True(t, res[1].Advanced)
	require.True(t, res[2].Advanced)
	require.Equal(t, receipt.Position{Seq: 5}, res[2].State.Read.Position)
	require.Equal(t, receipt.Position{Seq: 9}, res[2].State.Delivered.Position)

	got, complete, err := cursors.NewStore(s).Get(ctx, "u2", nil)
	require.NoError(t, err)
	require.True(t, complete, "the last hydrate chunk marked the hash complete")
	require.Len(t, got, len(durable))
	got, _, err = cursors.NewStore(s).Get(ctx, "u1", nil)
	require.NoError(t, err)
	require.Len(t, got, 2)

	// The reload leaves the scripts cached: the next merge needs no retry.
	_, err = cursors.NewStore(s).Merge(ctx, []receipt.State{mark("u1", "c3", 0, 1, "m1", true)})
	require.NoError(t, err)
	for _, c := range log.Reset() {
		require.NotContains(t, c, "NOSCRIPT", "the scripts were reloaded")
	}
}

// A merge whose script cannot be reloaded (Redis is gone) fails with
// ErrUnavailable rather than retrying for ever.
func TestMergeFailsUnavailableWhenRedisIsGone(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	s := redisstore.New(rdb, redisstore.Config{})
	_, err = cursors.NewStore(s).Merge(context.Background(), []receipt.State{mark("u1", "c1", 0, 5, "m5", true)})
	require.ErrorIs(t, err, redisstore.ErrUnavailable)
	require.ErrorIs(t, cursors.NewStore(s).Hydrate(context.Background(), "u1", []receipt.State{mark("u1", "c1", 0, 5, "m5", true)}, redisstore.Incarnation{}), redisstore.ErrUnavailable)
}
