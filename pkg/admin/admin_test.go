package admin_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/admin"
)

// get serves one request through h and returns the status and body.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(body)
}

func TestHealthzIsAlwaysOK(t *testing.T) {
	t.Parallel()
	// Liveness says only that the process serves: even a service that is
	// not ready is alive.
	h := admin.Handler(admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Ready:    func(context.Context) error { return errors.New("postgres is down") },
	})
	code, body := get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
}

func TestReadyzWithoutReadyFuncIsReady(t *testing.T) {
	t.Parallel()
	code, body := get(t, admin.Handler(admin.Config{Gatherer: prometheus.NewRegistry()}), "/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ready\n", body)
}

func TestReadyzReportsTheReadyFunc(t *testing.T) {
	t.Parallel()
	var notReady error
	var sawDeadline bool
	h := admin.Handler(admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Ready: func(ctx context.Context) error {
			// The check is bounded: a hung dependency cannot hang the probe.
			dl, ok := ctx.Deadline()
			sawDeadline = ok && time.Until(dl) <= 2*time.Second
			return notReady
		},
	})

	code, body := get(t, h, "/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ready\n", body)
	require.True(t, sawDeadline, "Ready is called with a bounded context")

	notReady = errors.Join(errors.New("dlt consumer: pinging kafka: dial refused"), errors.New("drift sweep: not running"))
	code, body = get(t, h, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.True(t, strings.HasPrefix(body, "not ready: "), body)
	require.Contains(t, body, "dlt consumer: pinging kafka: dial refused", "the reason is in the answer")
	require.Contains(t, body, "drift sweep: not running", "every reason is in the answer")

	notReady = nil
	code, _ = get(t, h, "/readyz")
	require.Equal(t, http.StatusOK, code, "readiness follows the func back")
}

func TestMetricsServeTheInjectedGatherer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Namespace: "receipts", Subsystem: "admintest", Name: "things_total", Help: "Things done.",
	}, []string{"kind"})
	c.WithLabelValues("a").Add(3)
	c.WithLabelValues("b").Inc()
	srv := httptest.NewServer(admin.Handler(admin.Config{Gatherer: reg}))
	defer srv.Close()

	require.NoError(t, testutil.ScrapeAndCompare(srv.URL+"/metrics", strings.NewReader(`
# HELP receipts_admintest_things_total Things done.
# TYPE receipts_admintest_things_total counter
receipts_admintest_things_total{kind="a"} 3
receipts_admintest_things_total{kind="b"} 1
`), "receipts_admintest_things_total"))

	// Only the injected registry is served: nothing from the global one
	// (which has the Go collector), nothing the registry does not hold.
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, string(body), "go_goroutines")
	require.Contains(t, string(body), "receipts_admintest_things_total")
}

func TestNewRegistryHasTheGoAndProcessCollectors(t *testing.T) {
	t.Parallel()
	reg := admin.NewRegistry()
	n, err := testutil.GatherAndCount(reg, "go_goroutines", "process_start_time_seconds")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	// Registering the same collectors again fails: a fresh registry per
	// binary, never the global one.
	require.Error(t, reg.Register(collectors.NewGoCollector()))
}

func TestPprofIndexIsServed(t *testing.T) {
	t.Parallel()
	h := admin.Handler(admin.Config{Gatherer: prometheus.NewRegistry()})
	code, body := get(t, h, "/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	for _, profile := range []string{"goroutine", "heap", "allocs"} {
		require.Contains(t, body, profile)
	}
	code, body = get(t, h, "/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine profile")
	code, _ = get(t, h, "/debug/pprof/cmdline")
	require.Equal(t, http.StatusOK, code)

	code, _ = get(t, h, "/nope")
	require.Equal(t, http.StatusNotFound, code)
}

func TestRegisterFlagsKeepsAddrAsDefault(t *testing.T) {
	t.Parallel()
	c := admin.Config{Addr: "127.0.0.1:9999"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.Equal(t, "127.0.0.1:9999", fs.Lookup("admin-addr").DefValue)
	require.NoError(t, fs.Parse([]string{"--admin-addr", "127.0.0.1:0"}))
	require.Equal(t, "127.0.0.1:0", c.Addr)
}
