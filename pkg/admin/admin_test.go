package admin_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
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
	reg := admin.NewRegistry(admin.Build{Version: "v1.2.3"})
	n, err := testutil.GatherAndCount(reg, "go_goroutines", "process_start_time_seconds")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	// Registering the same collectors again fails: a fresh registry per
	// binary, never the global one.
	require.Error(t, reg.Register(collectors.NewGoCollector()))
}

// TestBuildInfo: receipts_build_info is 1, labelled with the build.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	reg := admin.NewRegistry(admin.Build{Version: "v1.2.3", Revision: "0123456789abcdef", GoVersion: "go1.99.1"})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP receipts_build_info Always 1; the labels say which build runs: version, VCS revision and Go version.
# TYPE receipts_build_info gauge
receipts_build_info{goversion="go1.99.1",revision="0123456789abcdef",version="v1.2.3"} 1
`), "receipts_build_info"))
}

// TestGCPausesAreExported: the Go collector exports the runtime's GC
// pauses as a histogram (what the gateway's own summary was), and the GC
// cycle counts; after a collection the histogram has counted a pause, and
// promtool check metrics has nothing to say of any of it.
func TestGCPausesAreExported(t *testing.T) {
	t.Parallel()
	reg := admin.NewRegistry(admin.Build{Version: "dev"})
	runtime.GC()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	pauses := byName["go_sched_pauses_total_gc_seconds"]
	require.NotNil(t, pauses, "no go_sched_pauses_total_gc_seconds")
	require.Equal(t, dto.MetricType_HISTOGRAM, pauses.GetType())
	h := pauses.GetMetric()[0].GetHistogram()
	require.GreaterOrEqual(t, h.GetSampleCount(), uint64(1), "runtime.GC() paused the world at least once")
	require.NotEmpty(t, h.GetBucket())
	require.NotNil(t, byName["go_gc_cycles_total_gc_cycles_total"], "the /gc/ metrics")
	require.GreaterOrEqual(t, byName["go_gc_cycles_total_gc_cycles_total"].GetMetric()[0].GetCounter().GetValue(), 1.0)
	require.NotNil(t, byName["go_gc_duration_seconds"], "the collector's defaults are kept")

	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	require.Empty(t, problems, "promtool check metrics would report them")
}

// TestPprofOnlyWithTheFlag: the admin port is unauthenticated, so pprof
// is 404 unless --pprof turns it on; /metrics, /healthz and /readyz are
// served either way.
func TestPprofOnlyWithTheFlag(t *testing.T) {
	t.Parallel()
	off := admin.Handler(admin.Config{Gatherer: prometheus.NewRegistry()})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/trace"} {
		code, _ := get(t, off, path)
		require.Equal(t, http.StatusNotFound, code, "%s without --pprof", path)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		code, _ := get(t, off, path)
		require.Equal(t, http.StatusOK, code, "%s without --pprof", path)
	}

	c := admin.Config{Gatherer: prometheus.NewRegistry()}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.Equal(t, "false", fs.Lookup("pprof").DefValue)
	require.NoError(t, fs.Parse([]string{"--pprof"}))
	on := admin.Handler(c)
	code, body := get(t, on, "/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	for _, profile := range []string{"goroutine", "heap", "allocs"} {
		require.Contains(t, body, profile)
	}
	code, body = get(t, on, "/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine profile")
	code, _ = get(t, on, "/debug/pprof/cmdline")
	require.Equal(t, http.StatusOK, code)

	code, _ = get(t, on, "/nope")
	require.Equal(t, http.StatusNotFound, code)
}

// TestReadyzMasksCredentials: a readiness reason or status line that
// quotes a URL or a DSN shows no password or token.
func TestReadyzMasksCredentials(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-Pa55"
	var notReady error
	h := admin.Handler(admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Ready:    func(context.Context) error { return notReady },
		Status:   func() []string { return []string{"sweep: reading rediss://default:" + secret + "@redis:6380/0"} },
	})
	code, body := get(t, h, "/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "rediss://default:xxxxx@redis:6380/0")
	require.NotContains(t, body, secret)

	notReady = errors.New("postgres: connecting to postgres://receipts:" + secret + "@pg:5432/receipts?sslmode=verify-full; " +
		"also host=pg user=receipts password=" + secret + " dbname=receipts, token=" + secret)
	code, body = get(t, h, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.NotContains(t, body, secret)
	require.Contains(t, body, "postgres://receipts:xxxxx@pg:5432/receipts?sslmode=verify-full")
	require.Contains(t, body, "password=xxxxx dbname=receipts")

	require.Equal(t, "dial tcp 10.0.0.1:6379: connection refused", admin.Redact("dial tcp 10.0.0.1:6379: connection refused"))
	require.Equal(t, "http://host:8080/x", admin.Redact("http://host:8080/x"), "a port is not a password")
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
