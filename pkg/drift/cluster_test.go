package drift_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// In Redis Cluster a SCAN sees one node: the sweep walks every master, so
// users held only in Redis are found and copied to Postgres wherever their
// slot lives, and users missing from Redis are merged back onto their own
// masters.
func TestSweepWalksEveryClusterMaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	cfg := redisstore.ClientConfig{Mode: redisstore.ModeCluster, Addrs: c.Addrs[:1], Prefix: "receipts:"}
	rdb, err := cfg.NewClient()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	rs := redisstore.New(rdb, cfg.StoreConfig())
	require.NoError(t, rs.Load(ctx))
	schema := pgtest.NewSchema(t)

	masterOf := func(user string) string {
		node, err := rdb.(*redis.ClusterClient).MasterForKey(ctx, cursors.NewStore(rs).RedisKey(user))
		require.NoError(t, err)
		return node.Options().Addr
	}
	// Redis-only users and Postgres-only users, on every master.
	var redisOnly, pgOnly []receipt.State
	redisMasters, pgMasters := map[string]int{}, map[string]int{}
	for i := range 45 {
		u := "r" + strconv.Itoa(i)
		redisOnly = append(redisOnly, state(u, "c", int64(i+1), true))
		redisMasters[masterOf(u)]++
		u = "p" + strconv.Itoa(i)
		pgOnly = append(pgOnly, state(u, "c", int64(i+1), true))
		pgMasters[masterOf(u)]++
	}
	require.Len(t, redisMasters, 3, "Redis-only users on all three masters: %v", redisMasters)
	require.Len(t, pgMasters, 3, "Postgres-only users belong on all three masters: %v", pgMasters)
	res, err := cursors.NewStore(rs).Merge(ctx, redisOnly)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	_, err = cursors.NewPostgres(schema.Store).Upsert(ctx, pgOnly)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	// Small pages: every master takes several.
	sw, err := drift.New(drift.Config{Postgres: schema.Store, Redis: rs, ScanCount: 5, PageSize: 10,
		PagesPerSecond: 1000, Grace: -1, Registerer: reg})
	require.NoError(t, err)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	// The Postgres walk comes first and merges the 45 Postgres-only users
	// into Redis: the Redis walk then sees all 90, each once.
	require.Equal(t, 90, rep.RedisUsers, "every Redis user visited once")
	require.Equal(t, drift.Counts{PostgresMissing: 45, RedisMissing: 45}, rep.Found)
	require.Equal(t, rep.Found, rep.Repaired)

	for _, st := range redisOnly {
		got, ok := pgState(t, schema.Store, st.Key)
		require.True(t, ok, "%s copied to Postgres", st.Key.KafkaKey())
		require.Equal(t, st.Read.Position, got.Read.Position)
	}
	for _, st := range pgOnly {
		got, ok := redisState(t, rs, st.Key)
		require.True(t, ok, "%s merged into Redis", st.Key.KafkaKey())
		require.Equal(t, st.Read.Position, got.Read.Position)
	}
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Found.Total(), "converged")
	require.Equal(t, 90, rep.RedisUsers)
}
