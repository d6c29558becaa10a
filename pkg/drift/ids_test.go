package drift_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
)

// The sweep finds Matrix-style ids (':' and '%' inside) whole in Redis key
// names and repairs them both ways.
func TestSweepRepairsMatrixIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	onlyPG := receipt.Key{User: "@alice:example.org", Channel: "!room:example.org"}
	onlyRedis := receipt.Key{User: "urn:tenant:bob%1", Channel: "!other:example.org/x"}
	redisAhead := receipt.Key{User: "tenant:carol", Channel: "!room:example.org"}
	_, err := cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{state(onlyPG.User, onlyPG.Channel, 4, true), state(redisAhead.User, redisAhead.Channel, 2, true)})
	require.NoError(t, err)
	_, err = cursors.NewStore(bd.rs).Merge(ctx, []receipt.State{state(onlyRedis.User, onlyRedis.Channel, 6, true), state(redisAhead.User, redisAhead.Channel, 8, true)})
	require.NoError(t, err)

	sw, err := drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, PageSize: 7, ScanCount: 50, PagesPerSecond: 1000, Registerer: bd.reg})
	require.NoError(t, err)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	want := drift.Counts{RedisAhead: 1, RedisMissing: 1, PostgresMissing: 1}
	require.Equal(t, want, rep.Found, "%+v", rep)
	require.Equal(t, want, rep.Repaired)
	for k, seq := range map[receipt.Key]int64{onlyPG: 4, onlyRedis: 6, redisAhead: 8} {
		p, ok := pgState(t, bd.pg, k)
		require.True(t, ok, "postgres has %v", k)
		r, ok := redisState(t, bd.rs, k)
		require.True(t, ok, "redis has %v", k)
		require.Equal(t, seq, p.Read.Position.Seq, "%v", k)
		require.True(t, p.SameCursors(r), "%v: postgres %+v, redis %+v", k, p, r)
	}
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Found.Total(), "%+v", rep.Found)
}
