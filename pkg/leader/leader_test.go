package leader_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/readstate/receipts/pkg/leader"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
)

// Every goroutine a test starts must be joined by its end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const lockName = "receipts.leader_test"

// replica is one loop on its own pool of the shared schema, with a job
// that counts its runs and says whether it is running.
type replica struct {
	loop    *leader.Loop
	gauge   prometheus.Gauge
	runs    atomic.Int32
	running atomic.Bool
}

func newReplica(t *testing.T, schema *pgtest.Schema, check time.Duration) *replica {
	t.Helper()
	pg, err := pgstore.Open(context.Background(), pgstore.Config{URL: pgtest.URL(), Schema: schema.Name, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	r := &replica{gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leader"})}
	r.loop, err = leader.New(leader.Config{Postgres: pg, Lock: lockName, CheckInterval: check, Name: "test job", Gauge: r.gauge})
	require.NoError(t, err)
	return r
}

// job runs until its context ends.
func (r *replica) job(ctx context.Context) {
	r.runs.Add(1)
	r.running.Store(true)
	<-ctx.Done()
	r.running.Store(false)
}

func (r *replica) leads() bool {
	return r.loop.Role() == leader.Leader && r.running.Load() && testutil.ToFloat64(r.gauge) == 1
}

// Two loops on one schema: exactly one runs the job; when its lock's
// session is terminated its job's context ends and the other takes over.
func TestOneLeaderAndHandover(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	a, b := newReplica(t, schema, 50*time.Millisecond), newReplica(t, schema, 50*time.Millisecond)
	wg.Go(func() { a.loop.Run(ctx, a.job) })
	wg.Go(func() { b.loop.Run(ctx, b.job) })

	var lead, standby *replica
	require.Eventually(t, func() bool {
		switch {
		case a.leads() && b.loop.Role() == leader.Standby:
			lead, standby = a, b
		case b.leads() && a.loop.Role() == leader.Standby:
			lead, standby = b, a
		default:
			return false
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "one loop leads, the other stands by")
	require.Zero(t, standby.runs.Load(), "the standby never ran the job")
	require.Zero(t, testutil.ToFloat64(standby.gauge))

	terminate(t, schema)
	require.Eventually(t, func() bool { return standby.leads() && !lead.running.Load() && lead.loop.Role() == leader.Standby },
		10*time.Second, 5*time.Millisecond, "the job moves to the other loop and stops on the old leader")
	require.Equal(t, int32(1), lead.runs.Load())

	cancel()
	wg.Wait()
	require.Equal(t, leader.None, a.loop.Role())
	require.Equal(t, leader.None, b.loop.Role())
	require.Zero(t, testutil.ToFloat64(a.gauge)+testutil.ToFloat64(b.gauge))
}

// Check is the guard before each unit of work: it finds a lost session
// without waiting for the periodic check (here an hour away), ends the
// job's context and makes the loop a standby.
func TestCheckStopsTheJobOnALostSession(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	r := newReplica(t, schema, time.Hour)
	checked, next := make(chan error), make(chan struct{})
	ended := make(chan struct{})
	wg.Go(func() {
		r.loop.Run(ctx, func(jobCtx context.Context) {
			checked <- r.loop.Check(jobCtx)
			<-next
			checked <- r.loop.Check(jobCtx)
			<-jobCtx.Done()
			close(ended)
		})
	})
	require.NoError(t, <-checked, "the session answers")
	require.Equal(t, leader.Leader, r.loop.Role())
	terminate(t, schema)
	close(next)
	require.Error(t, <-checked, "the lost session fails the check")
	<-ended // the job's context ended
	require.Equal(t, leader.Standby, r.loop.Role())
	require.Zero(t, testutil.ToFloat64(r.gauge))
	cancel()
}

// A lone loop whose job ends early (or whose session was lost) leads
// again after its pause, on a new session.
func TestJobEndingEarlyLeadsAgain(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	r := newReplica(t, schema, 20*time.Millisecond)
	wg.Go(func() { r.loop.Run(ctx, func(context.Context) { r.runs.Add(1) }) })
	require.Eventually(t, func() bool { return r.runs.Load() >= 3 }, 10*time.Second, 5*time.Millisecond)
}

// Without a store there is no election: the job runs at once and Check
// always passes.
func TestNoElection(t *testing.T) {
	t.Parallel()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "leader"})
	var roles []leader.Role
	l, err := leader.New(leader.Config{Gauge: gauge, OnRole: func(r leader.Role) { roles = append(roles, r) }})
	require.NoError(t, err)
	require.False(t, l.Elected())
	ran := false
	l.Run(context.Background(), func(ctx context.Context) {
		ran = true
		require.Equal(t, leader.Leader, l.Role())
		require.Equal(t, 1.0, testutil.ToFloat64(gauge))
		require.NoError(t, l.Check(ctx))
	})
	require.True(t, ran)
	require.Equal(t, []leader.Role{leader.Leader, leader.None}, roles)
	require.Zero(t, testutil.ToFloat64(gauge))

	_, err = leader.New(leader.Config{Postgres: &pgstore.Store{}})
	require.ErrorContains(t, err, "Lock is required")
}

// terminate ends the session holding the test lock in schema.
func terminate(t *testing.T, schema *pgtest.Schema) {
	t.Helper()
	var killed bool
	require.NoError(t, schema.Store.Pool().QueryRow(context.Background(), `
		SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((classid::int8 << 32) | objid::int8) = hashtextextended($1 || ':' || $2, 0)`,
		lockName, schema.Name).Scan(&killed))
	require.True(t, killed)
}
