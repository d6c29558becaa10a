package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a component that records its start and stop in a shared log
// and is ready once started, unless told otherwise.
type recorder struct {
	name     string
	log      *[]string
	mu       *sync.Mutex
	started  chan struct{}
	notReady error
	// stopDelay is how long Run takes to return after ctx ends.
	stopDelay time.Duration
	fail      error // returned at once instead of running
}

func newRecorder(name string, log *[]string, mu *sync.Mutex) *recorder {
	return &recorder{name: name, log: log, mu: mu, started: make(chan struct{})}
}

func (r *recorder) add(event string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, event+" "+r.name)
}

func (r *recorder) Run(ctx context.Context) error {
	r.add("start")
	close(r.started)
	if r.fail != nil {
		return r.fail
	}
	<-ctx.Done()
	time.Sleep(r.stopDelay)
	r.add("stop")
	return nil
}

func (r *recorder) Ready(context.Context) error { return r.notReady }

func TestStartsInOrderAndStopsInReverse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		var mu sync.Mutex
		a, b, c := newRecorder("a", &log, &mu), newRecorder("b", &log, &mu), newRecorder("c", &log, &mu)
		r := lifecycle.New(lifecycle.Config{})
		waited := false
		r.Wait("dependency", func(context.Context) error { waited = true; return nil })
		r.Add("a", a)
		r.Add("b", b)
		r.Add("c", c)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-a.started
		<-b.started
		<-c.started
		synctest.Wait()
		require.True(t, waited)
		require.NoError(t, r.Ready(ctx))
		cancel()
		require.NoError(t, <-done)
		require.Equal(t, []string{"stop c", "stop b", "stop a"}, log[3:])
	})
}

func TestReadyOnlyWhenEveryComponentIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		var mu sync.Mutex
		a, b := newRecorder("a", &log, &mu), newRecorder("b", &log, &mu)
		b.notReady = errors.New("kafka down")
		r := lifecycle.New(lifecycle.Config{})
		gate := make(chan struct{})
		r.Wait("postgres migrations", func(ctx context.Context) error {
			<-gate
			return nil
		})
		r.Add("a", a)
		r.Add("b", b)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		synctest.Wait()
		require.EqualError(t, r.Ready(ctx), "waiting for postgres migrations")
		close(gate)
		<-b.started
		synctest.Wait()
		require.EqualError(t, r.Ready(ctx), "b: kafka down", "names the component that is not ready")
		cancel()
		require.NoError(t, <-done)
		require.EqualError(t, r.Ready(ctx), "stopping")
	})
}

func TestAFailingComponentStopsTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		var mu sync.Mutex
		a, b := newRecorder("a", &log, &mu), newRecorder("b", &log, &mu)
		b.fail = errors.New("client closed")
		r := lifecycle.New(lifecycle.Config{})
		r.Add("a", a)
		r.Add("b", b)
		err := r.Run(context.Background())
		require.EqualError(t, err, "b: client closed")
		require.Contains(t, log, "stop a", "the healthy component was stopped and joined")
	})
}

func TestAFailedDependencyStartsNothing(t *testing.T) {
	var log []string
	var mu sync.Mutex
	a := newRecorder("a", &log, &mu)
	r := lifecycle.New(lifecycle.Config{})
	r.Wait("postgres migrations", func(context.Context) error { return errors.New("database does not exist") })
	r.Add("a", a)
	err := r.Run(context.Background())
	require.EqualError(t, err, "waiting for postgres migrations: database does not exist")
	require.Empty(t, log)
}

// The stop deadline is the behaviour: a component that outlives it is
// reported, and the components before it are still cancelled.
func TestStopDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		var mu sync.Mutex
		a, slow := newRecorder("a", &log, &mu), newRecorder("slow", &log, &mu)
		slow.stopDelay = time.Minute
		r := lifecycle.New(lifecycle.Config{StopTimeout: 10 * time.Second})
		r.Add("a", a)
		r.Add("slow", slow)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-slow.started
		cancel()
		start := time.Now()
		err := <-done
		require.ErrorIs(t, err, lifecycle.ErrStopTimeout)
		require.ErrorContains(t, err, "slow:")
		require.Equal(t, 10*time.Second, time.Since(start), "gave up exactly at the deadline")
		// Let the stuck component finish so the bubble ends clean.
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Contains(t, log, "stop a")
	})
}

func TestAdminPortServesReadiness(t *testing.T) {
	var log []string
	var mu sync.Mutex
	a := newRecorder("api", &log, &mu)
	a.notReady = errors.New("spool full")
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "receipts_test_total", Help: "test"}))
	r := lifecycle.New(lifecycle.Config{Admin: admin.Config{Addr: "127.0.0.1:0", Gatherer: reg}})
	r.Add("api", a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-a.started
	base := "http://" + r.AdminAddr()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	// The runner says "starting" until it has seen every component
	// start, which may come a moment after the component's own signal.
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = get("/readyz")
		return body != "not ready: starting\n"
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: api: spool full\n", body)
	code, body = get("/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, body = get("/metrics")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.Contains(body, "receipts_test_total 0"), body)
	code, _ = get("/debug/pprof/cmdline")
	require.Equal(t, http.StatusNotFound, code, "pprof only with --pprof")
	cancel()
	require.NoError(t, <-done)
	// The admin port is closed once Run returned.
	_, err := http.Get(base + "/healthz")
	require.Error(t, err)
}

func TestABadAdminAddressFailsAtOnce(t *testing.T) {
	r := lifecycle.New(lifecycle.Config{Admin: admin.Config{Addr: "256.0.0.1:bad"}})
	require.ErrorContains(t, r.Run(context.Background()), "listening on admin address")
}

func TestWhileUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := errors.New("connection refused")
		broken := errors.New("database does not exist")
		unavailable := func(err error) bool { return errors.Is(err, down) }

		// Waits, and says so, while the dependency is unavailable.
		attempts, waits := 0, 0
		err := lifecycle.WhileUnavailable(context.Background(), func(context.Context) error {
			attempts++
			if attempts < 4 {
				return down
			}
			return nil
		}, unavailable, func(error) { waits++ })
		require.NoError(t, err)
		require.Equal(t, 4, attempts)
		require.Equal(t, 3, waits)

		// Any other error ends it at once.
		attempts = 0
		err = lifecycle.WhileUnavailable(context.Background(), func(context.Context) error {
			attempts++
			return broken
		}, unavailable, nil)
		require.ErrorIs(t, err, broken)
		require.Equal(t, 1, attempts)

		// The context ends the wait.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = lifecycle.WhileUnavailable(ctx, func(context.Context) error { return down }, unavailable, nil)
		require.Error(t, err)
	})
}

func TestOnceAndFunc(t *testing.T) {
	failed := errors.New("migration 0003 is broken")
	require.ErrorIs(t, lifecycle.Once(func(context.Context) error { return failed }).Run(context.Background()), failed)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, lifecycle.Once(func(ctx context.Context) error { return ctx.Err() }).Run(ctx),
		"a job cut short by the stop is not a failure")
	require.NoError(t, lifecycle.Once(func(context.Context) error { return failed }).Ready(ctx), "always ready")

	f := lifecycle.Func(func(ctx context.Context) error { <-ctx.Done(); return nil }, nil)
	require.EqualError(t, f.Ready(ctx), "not running")
}

// describing is a component that says what it is doing.
type describing struct{ status string }

func (describing) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (describing) Ready(context.Context) error   { return nil }
func (d describing) Status() string              { return d.status }

// /readyz says "ready", then what the components that describe themselves
// are doing (a standby drift sweep is ready, and says it stands by).
func TestReadyzShowsStatuses(t *testing.T) {
	r := lifecycle.New(lifecycle.Config{Admin: admin.Config{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry()}})
	r.Add("drift sweep", describing{status: "standby (another replica leads)"})
	r.Add("quiet", describing{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool {
		if r.AdminAddr() == "" {
			return false
		}
		resp, err := http.Get("http://" + r.AdminAddr() + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && string(body) == "ready\ndrift sweep: standby (another replica leads)\n"
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"drift sweep: standby (another replica leads)"}, r.Status())
}
