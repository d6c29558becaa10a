package server

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/tracing"
)

// Defaults. Each Config field names its default.
const (
	AddrDefault         = "127.0.0.1:8080"
	MaxBodyBytesDefault = 1 << 20

	ReadHeaderTimeoutDefault = 5 * time.Second
	ReadTimeoutDefault       = 15 * time.Second
	WriteTimeoutDefault      = 30 * time.Second
	IdleTimeoutDefault       = 2 * time.Minute
	ShutdownTimeoutDefault   = 10 * time.Second
	// ShutdownDelayDefault is no delay: outside Kubernetes (the dev stack,
	// tests, a process manager) nothing routes by readiness, so a delay
	// would only slow every stop. The chart sets one (kafkagate.shutdownDelay).
	ShutdownDelayDefault = 0

	// WatchHeartbeatDefault is the pause after which an idle server-sent
	// events stream gets a comment line, so proxies keep it open.
	WatchHeartbeatDefault = 15 * time.Second
	// WatchWriteTimeoutDefault bounds the write of one watch event (or
	// heartbeat): a client that stops reading fills its connection's
	// buffers, and the stream is dropped rather than held.
	WatchWriteTimeoutDefault = 10 * time.Second
)

// The server's metrics are the gate's: receipts_kafkagate_….
const (
	metricsNamespace = "receipts"
	metricsSubsystem = gate.MetricsSubsystem
)

// Config configures a Server. The zero value of every field is replaced by
// its default.
type Config struct {
	// Addr is the API listen address used by Run. Defaults to AddrDefault.
	Addr string
	// MaxBodyBytes bounds a request body (REST) or message (RPC). Defaults
	// to MaxBodyBytesDefault (1 MiB).
	MaxBodyBytes int64

	// HTTP server timeouts. WriteTimeout must leave room for a whole call
	// (the gate's CallBound: Redis, then the produce deadline). Default to
	// the *TimeoutDefault constants.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// ShutdownTimeout bounds the graceful drain of in-flight calls.
	// Defaults to ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long the API keeps serving after the stop
	// began, while readiness (the admin /readyz and gRPC health) already
	// fails: the time for endpoint controllers, kube-proxy and load
	// balancers to stop sending new calls to a terminating pod. Only then
	// does the drain (ShutdownTimeout) start. Defaults to
	// ShutdownDelayDefault (none).
	ShutdownDelay time.Duration

	// WatchHeartbeat is the idle pause before a watch stream's heartbeat
	// (server-sent events: a comment line; gRPC and Connect: an event
	// without updates carrying the last resume token). Defaults to
	// WatchHeartbeatDefault.
	WatchHeartbeat time.Duration
	// WatchWriteTimeout bounds the write of each watch event and
	// heartbeat; a stream whose write misses it ends. Defaults to
	// WatchWriteTimeoutDefault.
	WatchWriteTimeout time.Duration
	// TranscodeAllREST turns the fast REST path of the hot write routes
	// off (fastrest.go): every REST call goes through vanguard. For
	// comparisons and as a switch should the two ever disagree.
	TranscodeAllREST bool

	// CORSAllowedOrigins lists the browser origins (scheme://host[:port])
	// whose pages may call the API: preflights are answered (without
	// credentials), and answers to them carry the CORS headers (cors.go);
	// the calls themselves still need credentials. Empty: CORS off, the
	// default (browsers then refuse cross-origin calls).
	CORSAllowedOrigins []string

	// Auth authenticates and rate-limits API callers (pkg/apiauth): bearer
	// tokens, mTLS, per-client events/s. Its zero value is an open API,
	// which only a loopback Addr may serve unless
	// Auth.InsecureAllowUnauthenticated. A rate limit's burst defaults to
	// at least the gate's MaxBatchItems, so that a full batch can pass.
	Auth apiauth.Config

	// Tracing, when on, gives every call a server span (RPCs by
	// otelconnect, REST and the fast path by the HTTP layer) and the
	// trace context to the gate. Nil or off: no instrumentation.
	Tracing *tracing.Tracing
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the server's request and GC metrics. Defaults to
	// a private registry (metrics then go nowhere).
	Registerer prometheus.Registerer
}

// RegisterFlags registers the server's flags, with the config's values
// (or the defaults, for zero fields) as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults(gate.MaxBatchItemsDefault)
	c.Addr, c.MaxBodyBytes = d.Addr, d.MaxBodyBytes
	c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout, c.ShutdownTimeout = d.ReadHeaderTimeout, d.ReadTimeout, d.WriteTimeout, d.IdleTimeout, d.ShutdownTimeout
	c.WatchHeartbeat, c.WatchWriteTimeout = d.WatchHeartbeat, d.WatchWriteTimeout
	fs.StringVar(&c.Addr, "listen", c.Addr, "API listen address: gRPC, gRPC-Web, Connect and HTTP/JSON on one port (HTTP/1.1 and h2c)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", c.MaxBodyBytes, "largest request body (REST: 413) or message (RPC: ResourceExhausted)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", c.ReadHeaderTimeout, "HTTP server: bound on reading request headers")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "HTTP server: bound on reading a whole request")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "HTTP server: bound on a whole call; must exceed redis-timeout + the produce bound")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "HTTP server: keep-alive idle bound")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "on SIGINT/SIGTERM, how long in-flight calls may finish (after --shutdown-delay)")
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay", c.ShutdownDelay, "on SIGINT/SIGTERM, how long the API keeps serving while readiness already fails, before draining: the time the load balancers need to stop routing here (Kubernetes: endpoint propagation, a few seconds); 0: drain at once")
	fs.DurationVar(&c.WatchHeartbeat, "watch-heartbeat", c.WatchHeartbeat, "idle pause before a heartbeat on a watch stream (SSE: a comment; gRPC/Connect: an event without updates)")
	fs.DurationVar(&c.WatchWriteTimeout, "watch-write-timeout", c.WatchWriteTimeout, "bound on writing one watch event or heartbeat; a stream whose client does not read in time is dropped")
	fs.Var((*originList)(&c.CORSAllowedOrigins), "cors-allowed-origins", "comma-separated browser origins (scheme://host[:port]) allowed to call the API cross-origin (CORS); empty: CORS off")
	fs.BoolVar(&c.TranscodeAllREST, "rest-transcode-all", c.TranscodeAllREST, "send the hot REST write routes through the generic transcoder too (no fast path)")
	c.Auth.RegisterFlags(fs)
}

// withDefaults returns a copy with every zero field set to its default;
// maxBatchItems is the gate's, the least burst of a rate limit.
func (c Config) withDefaults(maxBatchItems int) Config {
	c.Addr = cmp.Or(c.Addr, AddrDefault)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, MaxBodyBytesDefault)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, ShutdownTimeoutDefault)
	c.WatchHeartbeat = cmp.Or(c.WatchHeartbeat, WatchHeartbeatDefault)
	c.WatchWriteTimeout = cmp.Or(c.WatchWriteTimeout, WatchWriteTimeoutDefault)
	lifecycle.DefaultTelemetry(&c.Logger, &c.Registerer)
	if c.Auth.RateLimit > 0 && c.Auth.RateLimitBurst == 0 {
		c.Auth.RateLimitBurst = max(int(c.Auth.RateLimit+0.999), maxBatchItems)
	}
	c.Auth.Namespace, c.Auth.Subsystem = metricsNamespace, metricsSubsystem
	c.Auth.Logger, c.Auth.Registerer = c.Logger, c.Registerer
	return c
}

// validate reports every bad field at once; maxBatchItems and callBound
// are the gate's (gate.Gate.MaxBatchItems, CallBound).
func (c Config) validate(maxBatchItems int, callBound time.Duration) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ReadHeaderTimeout", c.ReadHeaderTimeout}, {"ReadTimeout", c.ReadTimeout},
		{"WriteTimeout", c.WriteTimeout}, {"IdleTimeout", c.IdleTimeout}, {"ShutdownTimeout", c.ShutdownTimeout},
		{"ShutdownDelay", c.ShutdownDelay},
		{"WatchHeartbeat", c.WatchHeartbeat}, {"WatchWriteTimeout", c.WatchWriteTimeout},
	} {
		if d.v < 0 {
			bad("%s: must be positive, got %s", d.name, d.v)
		}
	}
	if c.WriteTimeout > 0 && c.WriteTimeout <= callBound {
		bad("WriteTimeout: %s leaves no room for a call (the gate's call bound %s)", c.WriteTimeout, callBound)
	}
	// 1 KiB is below any real batch; 64 MiB keeps vanguard's uint32 buffer
	// limit and memory per request sane.
	if c.MaxBodyBytes < 1<<10 || c.MaxBodyBytes > 64<<20 {
		bad("MaxBodyBytes: must be within [1KiB, 64MiB], got %d", c.MaxBodyBytes)
	}
	if _, err := newCORS(c.CORSAllowedOrigins); err != nil {
		errs = append(errs, err)
	}
	if err := c.Auth.Check(c.Addr); err != nil {
		errs = append(errs, err)
	}
	if c.Auth.RateLimit > 0 && c.Auth.RateLimitBurst < maxBatchItems {
		bad("RateLimitBurst: %d is below MaxBatchItems %d: a full batch could never pass", c.Auth.RateLimitBurst, maxBatchItems)
	}
	return errors.Join(errs...)
}

// originList is a comma-separated list flag value.
type originList []string

func (l *originList) String() string { return strings.Join(*l, ",") }

// Set replaces the list with the comma-separated values.
func (l *originList) Set(v string) error {
	*l = nil
	for o := range strings.SplitSeq(v, ",") {
		if o = strings.TrimSpace(o); o != "" {
			*l = append(*l, o)
		}
	}
	return nil
}
