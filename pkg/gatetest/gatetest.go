// Package gatetest runs a whole kafkagate in-process for tests outside
// pkg/gate (the Go client's, for one): the real Redis under a key prefix of
// the test, a migrated Postgres schema of the test, a kfake broker with
// topics of the test, a watch hub, and the API server on 127.0.0.1. The
// gateway can be stopped and started again on the same address and
// backends, as a rolling restart does. Only _test.go files import it.
package gatetest

import (
	"cmp"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/gate/server"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/views/readby"
	"github.com/readstate/receipts/pkg/watch"
)

// Config is what a gateway of the stack is built with; Options.Config may
// change it before each start.
type Config struct {
	Gate    gate.Config
	Server  server.Config
	Durable producer.Config
}

// Options shape a Stack.
type Options struct {
	// Config, when set, changes each gateway's config before it starts.
	Config func(*Config)
	// NoWatch leaves the watch hub out (WatchChannels is then
	// Unimplemented).
	NoWatch bool
}

// Stack is one test's backends and the gateway serving on URL.
type Stack struct {
	// URL is the API's base URL (http://127.0.0.1:port), the same across
	// restarts.
	URL    string
	Redis  *redis.Client
	Prefix string
	Broker *kafkatest.Broker
	Schema *pgtest.Schema
	Hub    *watch.Hub // nil with Options.NoWatch

	t    testing.TB
	opts Options
	log  *zap.Logger
	addr string

	mu   sync.Mutex
	stop func() // stops the running gateway; nil when stopped
}

// Start builds the backends and starts a gateway on 127.0.0.1:0; all of
// it stops when the test ends.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	rdb := redistest.Client(t)
	s := &Stack{
		Redis:  rdb,
		Prefix: redistest.Prefix(t, rdb),
		Broker: kafkatest.New(t),
		Schema: pgtest.NewSchema(t),
		t:      t,
		opts:   opts,
		log:    zaptest.NewLogger(t),
	}
	if !opts.NoWatch {
		s.Hub = StartHub(t, rdb, s.Prefix)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.addr = ln.Addr().String()
	s.URL = "http://" + s.addr
	s.serve(ln)
	return s
}

// Restart starts the gateway again on the same address and backends
// (new gate, server and producer, as a restarted process). The gateway
// must be stopped.
func (s *Stack) Restart() {
	s.t.Helper()
	s.mu.Lock()
	running := s.stop != nil
	s.mu.Unlock()
	require.False(s.t, running, "restarting a running gateway")
	ln, err := net.Listen("tcp", s.addr)
	require.NoError(s.t, err)
	s.serve(ln)
}

// Stop drains and stops the gateway, as SIGTERM does: watch streams end
// with Unavailable, then the server and the producer stop. The backends
// stay up; Restart serves again.
func (s *Stack) Stop() {
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Replica starts a second gateway on the same backends on its own port
// and returns its base URL; it stops when the test ends.
func (s *Stack) Replica() string {
	s.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(s.t, err)
	Serve(s.t, s.Config(), ln)
	return "http://" + ln.Addr().String()
}

// Config is the config the stack's gateways are built with (before
// Options.Config), on a fresh metrics registry.
func (s *Stack) Config() Config {
	reg := prometheus.NewRegistry()
	cfg := Config{
		Gate: gate.Config{
			Redis:       s.Redis,
			RedisPrefix: s.Prefix,
			Postgres:    s.Schema.Store,
			Logger:      s.log,
			Registerer:  reg,
		},
		Server: server.Config{Logger: s.log, Registerer: reg},
		Durable: producer.Config{
			Kafka:            kafkaconf.Config{Brokers: s.Broker.Seeds},
			KafkaOpts:        kafkatest.FastClientOpts(s.Broker.Seeds),
			Topic:            s.Broker.Topic,
			MaxRecordBytes:   gate.MaxRecordBytes,
			MetricsSubsystem: gate.MetricsSubsystem,
			Logger:           s.log,
			Registerer:       reg,
		},
	}
	if s.Hub != nil {
		cfg.Gate.Watch = s.Hub
	}
	if s.opts.Config != nil {
		s.opts.Config(&cfg)
	}
	return cfg
}

func (s *Stack) serve(ln net.Listener) {
	_, _, stop := Serve(s.t, s.Config(), ln)
	s.mu.Lock()
	s.stop = stop
	s.mu.Unlock()
	s.t.Cleanup(s.Stop)
}

// Serve builds a producer, a gate and its server from cfg and serves on
// ln until stop or the end of the test, as kafkagate's runner does: the
// producer's replayer runs beside the server, and the server drains
// before the producer stops and closes. stop is idempotent.
func Serve(t testing.TB, cfg Config, ln net.Listener) (g *gate.Gate, srv *server.Server, stop func()) {
	t.Helper()
	prod, err := producer.New(cfg.Durable)
	require.NoError(t, err)
	gc := cfg.Gate
	gc.Producer = prod
	g, err = gate.New(gc)
	require.NoError(t, err)
	srv, err = server.New(cfg.Server, g)
	require.NoError(t, err)
	prodCtx, stopProd := context.WithCancel(context.Background())
	replayed := make(chan error, 1)
	go func() { replayed <- prod.Run(prodCtx) }()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	require.Eventually(t, srv.Serving, 5*time.Second, time.Millisecond)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-served)
			stopProd()
			require.NoError(t, <-replayed)
			prod.Close()
		})
	}
	t.Cleanup(stop)
	return g, srv, stop
}

// StartHub runs a watch hub on the prefix until the test ends, as
// kafkagate's runner does (it stops after the API), with short coalescing
// and blocking so tests see updates quickly.
func StartHub(t testing.TB, rdb redis.UniversalClient, prefix string) *watch.Hub {
	t.Helper()
	return StartHubConfig(t, watch.Config{Redis: rdb, Keys: readby.NewStore(nil, redisstore.New(rdb, redisstore.Config{Prefix: prefix}))})
}

// StartHubConfig is StartHub with cfg (its Redis and Prefix set), the
// short coalescing and blocking filled in where cfg leaves them zero.
func StartHubConfig(t testing.TB, cfg watch.Config) *watch.Hub {
	t.Helper()
	cfg.Coalesce = cmp.Or(cfg.Coalesce, 20*time.Millisecond)
	cfg.Block = cmp.Or(cfg.Block, 50*time.Millisecond)
	// A client of its own, as kafkagate's hub has: the gateway bounds
	// every command of its client (redisstore.Bound), a blocking XREAD
	// included.
	if c, ok := cfg.Redis.(*redis.Client); ok {
		own := redis.NewClient(c.Options())
		t.Cleanup(func() { _ = own.Close() })
		cfg.Redis = own
	}
	h, err := watch.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool { return h.Ready(ctx) == nil }, 5*time.Second, 5*time.Millisecond)
	return h
}
