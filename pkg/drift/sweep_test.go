package drift_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

func TestSweepRepairsBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)

	var pgSeed, redisSeed []receipt.State
	// Agreeing keys over many users, so both walks take several pages.
	for u := range 12 {
		for c := range 3 {
			s := state(fmt.Sprintf("user%02d", u), fmt.Sprintf("ch%d", c), int64(10+c), true)
			pgSeed, redisSeed = append(pgSeed, s), append(redisSeed, s)
		}
	}
	redisAhead := receipt.Key{User: "user03", Channel: "ahead"}
	pgAhead := receipt.Key{User: "user04", Channel: "behind"}
	redisMissing := receipt.Key{User: "user05", Channel: "only-pg"}
	pgMissing := receipt.Key{User: "user06", Channel: "only-redis"}
	newUser := receipt.Key{User: "zz-only-redis", Channel: "c"} // a user Postgres has never seen
	// Read ahead in Redis and delivered ahead in Postgres: drift both ways
	// on one key.
	mixed := receipt.Key{User: "user07", Channel: "mixed"}
	pgSeed = append(pgSeed,
		state(redisAhead.User, redisAhead.Channel, 5, true),
		state(pgAhead.User, pgAhead.Channel, 9, true),
		state(redisMissing.User, redisMissing.Channel, 7, true),
		state(mixed.User, mixed.Channel, 30, false),
	)
	redisSeed = append(redisSeed,
		state(redisAhead.User, redisAhead.Channel, 9, true),
		state(pgAhead.User, pgAhead.Channel, 5, true),
		state(pgMissing.User, pgMissing.Channel, 4, true),
		state(newUser.User, newUser.Channel, 8, true),
		state(mixed.User, mixed.Channel, 20, true),
	)
	_, err := cursors.NewPostgres(bd.pg).Upsert(ctx, pgSeed)
	require.NoError(t, err)
	_, err = cursors.NewStore(bd.rs).Merge(ctx, redisSeed)
	require.NoError(t, err)
	// One user's hash is complete (hydrated); the others are not.
	require.NoError(t, cursors.NewStore(bd.rs).Hydrate(ctx, "user00", pgSeed[:3], redisstore.Incarnation{}))

	// The floor every key must keep: the greatest value seeded anywhere.
	floor := map[receipt.Key]receipt.State{}
	for _, s := range append(append([]receipt.State{}, pgSeed...), redisSeed...) {
		floor[s.Key], _ = receipt.Merge(floor[s.Key], s)
	}

	sw, err := drift.New(drift.Config{
		Postgres: bd.pg, Redis: bd.rs, PageSize: 7, ScanCount: 50, PagesPerSecond: 1000, Registerer: bd.reg,
	})
	require.NoError(t, err)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)

	want := drift.Counts{RedisAhead: 2, PostgresAhead: 2, RedisMissing: 1, PostgresMissing: 2}
	require.Equal(t, want, rep.Found, "%+v", rep)
	require.Equal(t, want, rep.Repaired)
	require.Equal(t, len(pgSeed), rep.PostgresRows)
	require.Equal(t, 13, rep.RedisUsers)
	require.Zero(t, rep.Failed)
	require.Zero(t, rep.InFlight)
	require.Greater(t, rep.Pages, 6, "both walks are paged")
	// The report names the first disagreements, each a drifting key.
	require.Len(t, rep.Samples, drift.MaxSamples)
	for _, smp := range rep.Samples {
		require.Equal(t, drift.KindCursors, smp.Kind)
		require.True(t, slices.ContainsFunc([]receipt.Key{redisAhead, pgAhead, redisMissing, pgMissing, newUser, mixed}, func(k receipt.Key) bool {
			return strings.Contains(smp.Key, k.User) && strings.Contains(smp.Key, k.Channel)
		}), "a sample of an agreeing key: %+v", smp)
		if smp.Direction == drift.DirRedisMissing {
			require.Equal(t, "[<nil>]", smp.Redis)
		}
	}
	for dir, n := range map[string]int{drift.DirRedisAhead: 2, drift.DirPostgresAhead: 2,
		drift.DirRedisMissing: 1, drift.DirPostgresMissing: 2} {
		require.Equal(t, float64(n), metric(t, bd.reg, "receipts_reconciler_drift_found_total", "direction", dir), dir)
		require.Equal(t, float64(n), metric(t, bd.reg, "receipts_reconciler_drift_repaired_total", "direction", dir), dir)
	}

	// Both stores agree on every key and nothing went below its floor.
	for k, f := range floor {
		p, ok := pgState(t, bd.pg, k)
		require.True(t, ok, "postgres has %v", k)
		r, ok := redisState(t, bd.rs, k)
		require.True(t, ok, "redis has %v", k)
		require.True(t, p.SameCursors(r), "%v: postgres %+v, redis %+v", k, p, r)
		require.True(t, p.SameCursors(f), "%v: %+v, want %+v", k, p, f)
	}
	p, _ := pgState(t, bd.pg, mixed)
	require.Equal(t, int64(20), p.Read.Position.Seq)
	require.Equal(t, int64(30), p.Delivered.Position.Seq)

	// A second pass finds nothing left to do.
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Found.Total(), "%+v", rep.Found)
	require.Empty(t, rep.Samples)
	require.Equal(t, 2.0, metric(t, bd.reg, "receipts_reconciler_sweeps_total", "result", "ok"))
}

func TestSweepLeavesInFlightWritesAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)

	// Redis just took seq 9 (the persister has not written it yet), and a
	// key Postgres has never seen, also just written.
	fresh := state("u1", "c1", 9, true)
	fresh.UpdatedAtUnixMs = time.Now().UnixMilli()
	brandNew := state("u1", "c2", 3, true)
	brandNew.UpdatedAtUnixMs = time.Now().UnixMilli()
	_, err := cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{state("u1", "c1", 5, true)})
	require.NoError(t, err)
	_, err = cursors.NewStore(bd.rs).Merge(ctx, []receipt.State{fresh, brandNew})
	require.NoError(t, err)

	sw, err := drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, Grace: time.Hour})
	require.NoError(t, err)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Found.Total(), "%+v", rep.Found)
	require.Equal(t, 2, rep.InFlight, "c1 in the Postgres walk, c2 (no row) in the Redis walk")
	p, _ := pgState(t, bd.pg, receipt.Key{User: "u1", Channel: "c1"})
	require.Equal(t, int64(5), p.Read.Position.Seq)

	// Without a grace period the same keys are drift and get repaired.
	sw, err = drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, Grace: -1})
	require.NoError(t, err)
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{RedisAhead: 1, PostgresMissing: 1}, rep.Found)
	p, _ = pgState(t, bd.pg, receipt.Key{User: "u1", Channel: "c1"})
	require.Equal(t, int64(9), p.Read.Position.Seq)
}
