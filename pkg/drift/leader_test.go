package drift_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// replica is one dlt-reconciler's sweep: its own Postgres pool on the
// shared schema, its own metrics.
type replica struct {
	sw  *drift.Sweeper
	reg *prometheus.Registry
}

func (r replica) leader(t *testing.T) bool {
	return metric(t, r.reg, "receipts_reconciler_sweep_leader") == 1
}

func (r replica) sweeps(t *testing.T) float64 {
	return metric(t, r.reg, "receipts_reconciler_sweeps_total", "result", "ok") +
		metric(t, r.reg, "receipts_reconciler_sweeps_total", "result", "error")
}

// Two replicas with Postgres leader election on one schema: exactly one
// sweeps, the other stands by (ready, saying so); terminating the leader's
// lock session hands the sweep to the other within a bound, and the old
// leader stops sweeping.
func TestLeaderElectionOneSweeperAndHandover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bd := setup(t)
	_, err := cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{state("alice", "c1", 3, true)})
	require.NoError(t, err)

	const checkEvery = 100 * time.Millisecond
	var replicas []replica
	var wg sync.WaitGroup
	for range 2 {
		pg, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.URL(), Schema: bd.schema.Name, MaxConns: 4})
		require.NoError(t, err)
		t.Cleanup(pg.Close)
		reg := prometheus.NewRegistry()
		sw, err := drift.New(drift.Config{Postgres: pg, Redis: bd.rs, Interval: 20 * time.Millisecond,
			PagesPerSecond: 1000, LeaderElection: drift.LeaderPostgres, LeaderCheckInterval: checkEvery, Registerer: reg})
		require.NoError(t, err)
		replicas = append(replicas, replica{sw: sw, reg: reg})
		wg.Go(func() { require.NoError(t, sw.Run(ctx)) })
	}
	defer wg.Wait()
	defer cancel()

	// Exactly one leads; the other stands by and never sweeps.
	var lead, standby replica
	require.Eventually(t, func() bool {
		a, b := replicas[0].leader(t), replicas[1].leader(t)
		switch {
		case a && !b:
			lead, standby = replicas[0], replicas[1]
		case b && !a:
			lead, standby = replicas[1], replicas[0]
		default:
			return false
		}
		return lead.sweeps(t) >= 3
	}, 10*time.Second, 10*time.Millisecond, "one replica leads and sweeps")
	require.Zero(t, standby.sweeps(t), "the standby never swept")
	require.False(t, standby.leader(t))
	require.Equal(t, "standby (another replica leads)", standby.sw.Status())
	require.NoError(t, standby.sw.Ready(ctx), "a standby is ready")
	require.Equal(t, "leader (holds the Postgres advisory lock)", lead.sw.Status())

	// Kill the leader's lock session, as a lost connection or a Postgres
	// failover would.
	pid := lockHolder(t, bd)
	var killed bool
	start := time.Now()
	require.NoError(t, bd.pg.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&killed))
	require.True(t, killed)

	// The standby takes over within a few check intervals; the old leader
	// stands by.
	require.Eventually(t, func() bool { return standby.leader(t) && !lead.leader(t) },
		5*time.Second, 10*time.Millisecond, "leadership moves to the other replica")
	took := time.Since(start)
	t.Logf("handover took %s (check interval %s)", took, checkEvery)
	oldLeaderSweeps := lead.sweeps(t)
	before := standby.sweeps(t)
	require.Eventually(t, func() bool { return standby.sweeps(t) >= before+3 }, 10*time.Second, 10*time.Millisecond, "the new leader sweeps")
	require.Equal(t, oldLeaderSweeps, lead.sweeps(t), "the old leader no longer sweeps")
	require.Equal(t, "standby (another replica leads)", lead.sw.Status())
}

// "lease" is a documented mode that is not built: refused with a reason.
func TestLeaderElectionModes(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	_, err := drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, LeaderElection: drift.LeaderLease})
	require.ErrorContains(t, err, `leader election "lease" (a Kubernetes Lease) is not implemented`)
	_, err = drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, LeaderElection: "raft"})
	require.ErrorContains(t, err, `leader election "raft": want one of postgres, none`)

	// Without election, Run sweeps and says so.
	reg := prometheus.NewRegistry()
	sw, err := drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, Interval: time.Hour, Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sw.Run(ctx) }()
	require.Eventually(t, func() bool { return metric(t, reg, "receipts_reconciler_sweeps_total", "result", "ok") == 1 },
		10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1.0, metric(t, reg, "receipts_reconciler_sweep_leader"))
	require.Equal(t, "sweeping (no leader election)", sw.Status())
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 0.0, metric(t, reg, "receipts_reconciler_sweep_leader"))
}

// A lone leader whose session is lost takes the lock back on a new
// connection and sweeps again.
func TestLeaderReacquiresAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	bd := setup(t)
	reg := prometheus.NewRegistry()
	sw, err := drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, Interval: 20 * time.Millisecond, PagesPerSecond: 1000,
		LeaderElection: drift.LeaderPostgres, LeaderCheckInterval: 50 * time.Millisecond, Registerer: reg})
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- sw.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	r := replica{sw: sw, reg: reg}

	require.Eventually(t, func() bool { return r.leader(t) && r.sweeps(t) >= 1 }, 10*time.Second, 10*time.Millisecond)
	first := lockHolder(t, bd)
	var killed bool
	require.NoError(t, bd.pg.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1)`, first).Scan(&killed))
	require.True(t, killed)
	require.Eventually(t, func() bool {
		pid, ok := lockHolderIf(t, bd)
		return ok && pid != first && r.leader(t)
	}, 10*time.Second, 10*time.Millisecond, "the lock is taken again, on a new session")
	before := r.sweeps(t)
	require.Eventually(t, func() bool { return r.sweeps(t) > before }, 10*time.Second, 10*time.Millisecond, "and the sweeps go on")
}

// lockHolder is the backend holding the sweep's lock in bd's schema.
func lockHolder(t *testing.T, bd *bundle) int {
	t.Helper()
	pid, ok := lockHolderIf(t, bd)
	require.True(t, ok, "nobody holds the sweep lock")
	return pid
}

func lockHolderIf(t *testing.T, bd *bundle) (int, bool) {
	t.Helper()
	var pids []int
	rows, err := bd.pg.Pool().Query(context.Background(), `
		SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((classid::int8 << 32) | objid::int8) = hashtextextended($1 || ':' || $2, 0)`,
		drift.LockName, bd.schema.Name)
	require.NoError(t, err)
	for rows.Next() {
		var pid int
		require.NoError(t, rows.Scan(&pid))
		pids = append(pids, pid)
	}
	require.NoError(t, rows.Err())
	require.LessOrEqual(t, len(pids), 1, "one holder at most")
	if len(pids) == 0 {
		return 0, false
	}
	return pids[0], true
}
