package drift_test

import (
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// sweeps reads receipts_reconciler_sweeps_total{result=…} from reg.
func sweeps(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	return metric(t, reg, "receipts_reconciler_sweeps_total", "result", result)
}

// runSweeper starts sw.Run; the returned func cancels it and returns what
// Run returned, failing the test if it does not return within waitFor.
func runSweeper(t *testing.T, sw *drift.Sweeper) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	stopped := false
	var err error
	stop = func() error {
		if stopped {
			return err
		}
		stopped = true
		cancel()
		select {
		case err = <-done:
		case <-time.After(waitFor):
			t.Fatal("Run did not return after its context ended")
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

const waitFor = 20 * time.Second

// The first sweep runs at once and the next ones each Interval after the
// previous one ended, failed sweeps included: a sweep that fails is counted
// as an error and the one after it still runs on time. The stores are
// unreachable (a closed port), so every sweep fails at once and fake time
// measures the schedule exactly.
func TestRunSweepsAtStartThenEveryIntervalEvenAfterFailures(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())

	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		pg, err := pgstore.Open(ctx, pgstore.Config{URL: "postgres://postgres@" + closed + "/receipts_test?sslmode=disable&connect_timeout=1"})
		require.NoError(t, err)
		defer pg.Close()
		rdb := redis.NewClient(&redis.Options{Addr: closed, DialerRetries: 1, MaxRetries: -1})
		defer func() { _ = rdb.Close() }()
		reg := prometheus.NewRegistry()
		const interval = 10 * time.Minute
		sw, err := drift.New(drift.Config{
			Postgres: pg, Redis: redisstore.New(rdb, redisstore.Config{}), Interval: interval, Registerer: reg,
		})
		require.NoError(t, err)

		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- sw.Run(runCtx) }()

		synctest.Wait()
		require.Equal(t, 1.0, sweeps(t, reg, "error"), "the first sweep runs at start")
		require.Zero(t, sweeps(t, reg, "ok"))

		for n := 2.0; n <= 4; n++ {
			time.Sleep(interval - time.Nanosecond)
			synctest.Wait()
			require.Equal(t, n-1, sweeps(t, reg, "error"), "no sweep before Interval has passed")
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			require.Equal(t, n, sweeps(t, reg, "error"), "a sweep each Interval, although the last one failed")
		}
		require.Equal(t, 1, testutil.CollectAndCount(reg, "receipts_reconciler_sweep_duration_seconds"))

		cancel()
		require.NoError(t, <-done, "Run returns nil when its context ends")
	})
}

// Run against real stores: not ready before it runs, sweeps (and repairs)
// at start, keeps sweeping, counts a sweep that fails because Postgres
// lost its schema mid-run as an error and goes on sweeping, repairs again
// once the schema is back, and returns nil, not ready, when its context
// ends.
func TestRunRepairsSurvivesAFailedSweepAndStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	sw, err := drift.New(drift.Config{
		Postgres: bd.pg, Redis: bd.rs, Interval: 20 * time.Millisecond, PagesPerSecond: 1000, Registerer: bd.reg,
	})
	require.NoError(t, err)
	require.ErrorContains(t, sw.Ready(ctx), "drift sweep not running")

	// Redis ahead of Postgres: the first sweep upserts Postgres.
	first := state("u1", "c1", 9, true)
	_, err = cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{state("u1", "c1", 4, true)})
	require.NoError(t, err)
	_, err = cursors.NewStore(bd.rs).Merge(ctx, []receipt.State{first})
	require.NoError(t, err)

	stop := runSweeper(t, sw)
	require.Eventually(t, func() bool {
		p, ok := pgState(t, bd.pg, first.Key)
		return ok && p.Read.Position.Seq == 9
	}, waitFor, 5*time.Millisecond, "the sweep at start repairs Postgres")
	require.Eventually(t, func() bool { return sw.Ready(ctx) == nil }, waitFor, 5*time.Millisecond, "ready while running")
	require.Eventually(t, func() bool { return sweeps(t, bd.reg, "ok") >= 2 }, waitFor, 5*time.Millisecond, "sweeps repeat")
	require.Zero(t, sweeps(t, bd.reg, "error"))

	// Postgres loses the schema mid-run: sweeps fail, are counted, and
	// Run goes on.
	gone := bd.schema.Name + "_gone"
	renamed := true
	rename := func(from, to string) {
		_, err := bd.pg.Pool().Exec(ctx, "ALTER SCHEMA "+from+" RENAME TO "+to)
		require.NoError(t, err)
	}
	rename(bd.schema.Name, gone)
	t.Cleanup(func() {
		if renamed { // so that pgtest drops it
			_, _ = bd.pg.Pool().Exec(context.Background(), "ALTER SCHEMA "+gone+" RENAME TO "+bd.schema.Name)
		}
	})
	require.Eventually(t, func() bool { return sweeps(t, bd.reg, "error") >= 2 }, waitFor, 5*time.Millisecond,
		"failed sweeps are counted, and the one after a failure runs")
	require.ErrorContains(t, sw.Ready(ctx), "last drift sweep failed", "a sweep that keeps failing shows in readiness")

	// Drift planted during the outage is repaired once the schema is back.
	second := state("u2", "c1", 7, true)
	_, err = cursors.NewStore(bd.rs).Merge(ctx, []receipt.State{second})
	require.NoError(t, err)
	okBefore := sweeps(t, bd.reg, "ok")
	rename(gone, bd.schema.Name)
	renamed = false
	require.Eventually(t, func() bool {
		p, ok := pgState(t, bd.pg, second.Key)
		return ok && p.Read.Position.Seq == 7
	}, waitFor, 5*time.Millisecond, "a sweep after the failures repairs again")
	require.Eventually(t, func() bool { return sweeps(t, bd.reg, "ok") > okBefore }, waitFor, 5*time.Millisecond,
		"sweeps succeed again")
	require.Eventually(t, func() bool { return sw.Ready(ctx) == nil }, waitFor, 5*time.Millisecond, "ready again after a good sweep")

	require.NoError(t, stop(), "Run returns nil when its context ends")
	require.ErrorContains(t, sw.Ready(ctx), "drift sweep not running")
}
