package pgstore

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/readstate/receipts/pkg/tracing"
)

// Defaults.
const (
	URLDefault      = "postgres://postgres@127.0.0.1:5432/receipts?sslmode=disable"
	MaxConnsDefault = 8
)

// Config configures a Store.
type Config struct {
	// URL is the Postgres connection string. Defaults to URLDefault.
	URL string
	// Schema, when set, is the only entry of search_path, so every table
	// lives in it (tests use a schema each). Defaults to the server's path.
	Schema string
	// MaxConns bounds the pool. Defaults to MaxConnsDefault.
	MaxConns int32
	// TracerProvider, when set, traces every statement as a span (SQL
	// text, never its arguments) under the caller's span; a call outside
	// any span starts none. Nil: no tracing, no cost.
	TracerProvider trace.TracerProvider
}

// RegisterFlags registers --pg-url and --pg-max-conns with the config's
// values as defaults (URL falls back to URLDefault).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	if c.URL == "" {
		c.URL = URLDefault
	}
	fs.StringVar(&c.URL, "pg-url", c.URL, "Postgres connection URL (TLS with sslmode=require/verify-full and sslrootcert=…)")
	fs.Var(int32Value{&c.MaxConns}, "pg-max-conns", "Postgres pool size (0: the binary's default)")
}

// int32Value is a flag.Value for an int32.
type int32Value struct{ p *int32 }

func (v int32Value) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v int32Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return err
	}
	*v.p = int32(n)
	return nil
}

// Store is a Postgres connection pool with the receipts queries.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects lazily: it does not fail when Postgres is down, so a service
// can start and report not-ready until the database answers.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		cfg.URL = URLDefault
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing postgres url: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	} else if !strings.Contains(cfg.URL, "pool_max_conns") {
		pc.MaxConns = MaxConnsDefault
	}
	if cfg.Schema != "" {
		pc.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = "receipts"
	}
	pc.ConnConfig.ConnectTimeout = 5 * time.Second
	if cfg.TracerProvider != nil {
		pc.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(tracing.ChildOnly(cfg.TracerProvider)),
			otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()), otelpgx.WithDisableAcquireTracer())
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("creating postgres pool: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Pool exposes the pool for tests and tools.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error { return classify(s.pool.Ping(ctx)) }

// MaxChannelsPerRead bounds how many rows one user read returns.
const MaxChannelsPerRead = 10000
