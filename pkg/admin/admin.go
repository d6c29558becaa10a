// Package admin is a binary's admin port handler: /metrics from the
// injected Prometheus registry, /healthz (the process is alive), /readyz
// (the readiness check, with the reason when not ready) and, only with
// --pprof, /debug/pprof. The lifecycle runner serves it.
//
// The admin port is not authenticated (probes and Prometheus scrape it), so
// it serves nothing secret: pprof (command line, heap contents, the ability
// to load the CPU) is off unless asked for, and the /readyz text has the
// credentials of any URL in it masked.
package admin

import (
	"context"
	"flag"
	"net/http"
	"net/http/pprof"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Config configures the admin server.
type Config struct {
	// Addr is the listen address, e.g. 127.0.0.1:9100 (":0" style for any
	// free port).
	Addr string
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// Ready returns nil when the service can do its work, or why not.
	Ready func(context.Context) error
	// Status, when set, adds lines after "ready" (what the components are
	// doing, e.g. a standby drift sweep).
	Status func() []string
	// Pprof serves /debug/pprof (--pprof). Off by default: the port is
	// unauthenticated, and a profile shows the command line and memory.
	Pprof  bool
	Logger *zap.Logger
}

// Build describes the running binary: the labels of receipts_build_info.
type Build struct {
	// Version is the binary's version (e.g. v1.2.3), Revision the VCS
	// revision it was built from ("" when unknown), GoVersion the
	// toolchain's (runtime.Version()).
	Version, Revision, GoVersion string
}

// goRuntimeGC are the runtime/metrics the Go collector adds to its
// defaults: every /gc/ metric (cycles, heap goal, allocations by size,
// stack and global roots) and the stop-the-world pauses for GC,
// /sched/pauses/total/gc:seconds, as the histogram
// go_sched_pauses_total_gc_seconds (the one to set tail latency beside).
var goRuntimeGC = []collectors.GoRuntimeMetricsRule{
	collectors.MetricsGC,
	{Matcher: regexp.MustCompile(`^/sched/pauses/total/gc:seconds$`)},
}

// NewRegistry returns a registry with the Go collector (its defaults and
// the GC metrics of goRuntimeGC), the process collector, and
// receipts_build_info: a gauge of 1 labelled with build's version,
// revision and goversion, so a dashboard can tell which build runs where.
func NewRegistry(build Build) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(goRuntimeGC...)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	promauto.With(reg).NewGauge(prometheus.GaugeOpts{
		Name: "receipts_build_info",
		Help: "Always 1; the labels say which build runs: version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{
			"version": build.Version, "revision": build.Revision, "goversion": build.GoVersion,
		},
	}).Set(1)
	return reg
}

// Handler builds the admin mux.
func Handler(cfg Config) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if cfg.Ready != nil {
			if err := cfg.Ready(ctx); err != nil {
				http.Error(w, "not ready: "+Redact(err.Error()), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
		if cfg.Status != nil {
			for _, line := range cfg.Status() {
				_, _ = w.Write([]byte(Redact(line) + "\n"))
			}
		}
	})
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// urlPassword and keyValueSecret match what a readiness message must not
// show: the password of a URL (scheme://user:password@host), and a
// password, token or secret as key=value (a libpq keyword/value DSN).
var (
	urlPassword    = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^@\s]*@`)
	keyValueSecret = regexp.MustCompile(`(?i)\b(password|passwd|token|secret)=\S+`)
)

// Redact masks the credentials in s (urlPassword, keyValueSecret) with
// "xxxxx".
func Redact(s string) string {
	s = urlPassword.ReplaceAllString(s, "${1}xxxxx@")
	return keyValueSecret.ReplaceAllString(s, "${1}=xxxxx")
}

// RegisterFlags registers --admin-addr with Addr as its default, and
// --pprof.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "admin-addr", c.Addr, "admin listen address (/metrics /healthz /readyz, and /debug/pprof with --pprof)")
	fs.BoolVar(&c.Pprof, "pprof", c.Pprof, "serve /debug/pprof on the admin port (unauthenticated: only where the port is private)")
}
