package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tracing"
)

// Main runs a command with a context that SIGINT and SIGTERM cancel, and
// exits 1 with the error on failure (0 after -h or --version).
func Main(name string, run func(ctx context.Context, args []string, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, ErrVersionShown) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Service is the command line every service binary shares:
//
//	NAME [flags]          run the service
//	NAME migrate [flags]  apply the Postgres migrations and exit
//
// Both forms take the Postgres and log flags (and --version); the service
// form also takes --admin-addr, --migrate and the service's own flags.
type Service struct {
	// Name is the binary's name; About is the paragraph --help prints.
	Name, About string
	// Postgres is the connection; its flags are registered by Parse.
	Postgres pgstore.Config
	// Admin is the admin port; Admin.Addr is its flag's default.
	Admin admin.Config
	// Redis, when set, is the service's Redis connection: its flags are
	// registered and Boot opens the client.
	Redis *redisstore.ClientConfig
	// Log are the log flags.
	Log LogFlags
	// Migrate is --migrate: apply the migrations at start-up.
	Migrate bool
	// MigrateOnly is true for the migrate subcommand.
	MigrateOnly bool
	// MigrateInBackground runs the start-up migrations beside the
	// components instead of before them (kafkagate: Postgres only serves
	// its read fallback, so marks are accepted meanwhile).
	MigrateInBackground bool
	// PoolSize, when set, turns the --pg-max-conns value into the pool the
	// service opens (the persister needs one connection per writer).
	PoolSize func(maxConns int32) int32
	// GCPercent is --gc-percent, the garbage collector's target (GOGC).
	GCPercent int
	// Stdout is where --version prints (os.Stdout when nil).
	Stdout io.Writer
	// StopTimeout bounds the runner's ordered stop (lifecycle.Config);
	// zero: lifecycle.StopTimeoutDefault. A service that waits on purpose
	// when it stops (kafkagate's --shutdown-delay) adds its wait.
	StopTimeout time.Duration
	// Tracing is --trace-sample-ratio; the OTEL_* variables do the rest
	// (pkg/tracing: off without an OTLP endpoint).
	Tracing tracing.Config
}

// GCPercentDefault is the services' GC target: their live heaps are small
// (tens of MB) and their allocation rates high, so Go's default of 100
// collects many times a second (see BENCHMARKS.md, why the defaults: GC
// target); 400 trades a few tens of MB for a quarter of
// the collections. A GOGC environment variable wins, as does
// GOMEMLIMIT (which Go honours as it is).
const GCPercentDefault = 400

// Boot is what every service starts with: its logger, its Postgres store
// and its metrics registry.
type Boot struct {
	Log      *zap.Logger
	Postgres *pgstore.Store
	Registry *prometheus.Registry
	// Redis is the client of Service.Redis (nil without it).
	Redis redis.UniversalClient
	// Tracing is the tracer provider (off unless the environment names an
	// OTLP endpoint); Postgres and Redis are traced with it when on.
	Tracing *tracing.Tracing

	redisConfig *redisstore.ClientConfig
	extraRedis  []redis.UniversalClient
}

// NewRedisClient is another client of Service.Redis, traced as Redis is
// and closed with it: for a component whose commands must not share the
// first one's pool or bound (a watch hub's blocking reads).
func (b *Boot) NewRedisClient() (redis.UniversalClient, error) {
	if b.redisConfig == nil {
		return nil, errors.New("the service has no Redis connection")
	}
	c, err := b.redisConfig.NewClient()
	if err != nil {
		return nil, err
	}
	if err := b.Tracing.InstrumentRedis(c); err != nil {
		_ = c.Close()
		return nil, err
	}
	b.extraRedis = append(b.extraRedis, c)
	return c, nil
}

// tracingShutdownTimeout bounds the flush of the last spans at exit.
const tracingShutdownTimeout = 5 * time.Second

// Close closes the clients, flushes the spans and the logger.
func (b *Boot) Close() {
	for _, c := range append(b.extraRedis, b.Redis) {
		if c != nil {
			_ = c.Close()
		}
	}
	b.Postgres.Close()
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	if err := b.Tracing.Shutdown(ctx); err != nil {
		b.Log.Warn("flushing the last spans", zap.Error(err))
	}
	cancel()
	_ = b.Log.Sync()
}

// Boot parses the command line (the service's own flags added by
// register), builds the logger and opens Postgres (lazily: it may be down).
// For the migrate subcommand it then applies the migrations and returns
// done; otherwise the caller builds its components, adds them to
// s.Runner(b) and closes b after the runner returned.
func (s *Service) Boot(ctx context.Context, args []string, stderr io.Writer, register func(fs *flag.FlagSet)) (b *Boot, done bool, err error) {
	if err := s.Parse(args, stderr, register); err != nil {
		return nil, true, err
	}
	log, err := s.Logger()
	if err != nil {
		return nil, true, err
	}
	if _, set := os.LookupEnv("GOGC"); !set && s.GCPercent != 0 {
		debug.SetGCPercent(s.GCPercent)
	}
	tr := tracing.Off()
	if !s.MigrateOnly {
		s.Tracing.ServiceName, s.Tracing.Version = s.Name, Build().Version
		if tr, err = tracing.Setup(ctx, s.Tracing); err != nil {
			return nil, true, err
		}
	}
	pc := s.Postgres
	if s.PoolSize != nil {
		pc.MaxConns = s.PoolSize(pc.MaxConns)
	}
	if tr.Enabled() {
		// The libraries that read the globals (none of ours: each component
		// is handed the provider) see the same.
		otel.SetTracerProvider(tr.Provider())
		otel.SetTextMapPropagator(tracing.Propagator)
		pc.TracerProvider = tr.Provider()
		log.Info("tracing on: spans exported over OTLP", zap.Float64("sample_ratio", s.Tracing.SampleRatio))
	}
	store, err := pgstore.Open(ctx, pc)
	if err != nil {
		_ = tr.Shutdown(ctx)
		return nil, true, err
	}
	b = &Boot{Log: log, Postgres: store, Registry: admin.NewRegistry(Build().Admin()), Tracing: tr}
	if s.MigrateOnly {
		defer b.Close()
		return nil, true, RunMigrations(ctx, store, log)
	}
	if s.Redis != nil {
		b.redisConfig = s.Redis
		if b.Redis, err = s.Redis.NewClient(); err != nil {
			b.Close()
			return nil, true, err
		}
		if err := tr.InstrumentRedis(b.Redis); err != nil {
			b.Close()
			return nil, true, err
		}
	}
	return b, false, nil
}

// Parse parses args (the migrate word included) into s, and, unless it is
// the migrate subcommand, the service's own flags, which register adds. It
// returns flag.ErrHelp after -h and ErrVersionShown after --version.
func (s *Service) Parse(args []string, stderr io.Writer, register func(fs *flag.FlagSet)) error {
	s.MigrateOnly = len(args) > 0 && args[0] == "migrate"
	if s.MigrateOnly {
		args = args[1:]
	}
	fs := s.FlagSet(stderr, register)
	if err := Parse(fs, args); err != nil {
		return err
	}
	out := s.Stdout
	if out == nil {
		out = os.Stdout
	}
	return VersionRequested(fs, s.Name, out)
}

// FlagSet builds the flag set of the service's command line (of the migrate
// subcommand when MigrateOnly is set), its usage writing to out.
func (s *Service) FlagSet(out io.Writer, register func(fs *flag.FlagSet)) *flag.FlagSet {
	name := s.Name
	if s.MigrateOnly {
		name += " migrate"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	RegisterVersionFlag(fs)
	s.Postgres.RegisterFlags(fs)
	s.Log.RegisterFlags(fs)
	if !s.MigrateOnly {
		s.Admin.RegisterFlags(fs)
		fs.BoolVar(&s.Migrate, "migrate", true, "apply the embedded migrations at start-up")
		s.Tracing.RegisterFlags(fs)
		fs.IntVar(&s.GCPercent, "gc-percent", GCPercentDefault, "garbage collector target percentage, as GOGC (which wins when set); 100 is Go's default, a negative value turns the collector off")
		if s.Redis != nil {
			s.Redis.RegisterFlags(fs)
		}
		if register != nil {
			register(fs)
		}
	}
	fs.Usage = func() {
		w := fs.Output()
		if s.MigrateOnly {
			fmt.Fprintf(w, "Usage: %s migrate [flags]\n\nApplies the embedded Postgres migrations (waiting for Postgres while it cannot be reached) and exits.\n\nFlags:\n", s.Name)
		} else {
			fmt.Fprintf(w, "Usage: %s [flags]\n       %s migrate [flags]\n\n%s\n\nFlags:\n", s.Name, s.Name, s.About)
		}
		PrintDefaults(fs)
	}
	return fs
}

// Logger builds the logger the log flags describe.
func (s *Service) Logger() (*zap.Logger, error) { return s.Log.New(s.Name) }

// RunMigrations applies the embedded migrations, waiting (and saying so)
// for as long as Postgres cannot be reached: a pod may start before its
// database. An error Postgres answers with (a missing database, a broken
// migration) ends it at once.
func RunMigrations(ctx context.Context, store *pgstore.Store, log *zap.Logger) error {
	var applied []string
	err := lifecycle.WhileUnavailable(ctx, func(ctx context.Context) error {
		var err error
		applied, err = store.Migrate(ctx)
		return err
	}, func(err error) bool { return pgstore.Classify(err) == errclass.Unavailable }, func(err error) {
		log.Warn("waiting for postgres to migrate", zap.Error(err))
	})
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	log.Info("migrations applied", zap.Strings("applied", applied))
	return nil
}

// Runner returns the lifecycle runner of the service: its admin port serves
// the boot's registry, and with --migrate the migrations come first (or run
// beside the components, with MigrateInBackground).
func (s *Service) Runner(b *Boot) *lifecycle.Runner {
	ac := s.Admin
	ac.Gatherer, ac.Logger = b.Registry, b.Log
	r := lifecycle.New(lifecycle.Config{Admin: ac, Logger: b.Log, StopTimeout: s.StopTimeout})
	if s.Migrate {
		migrate := func(ctx context.Context) error { return RunMigrations(ctx, b.Postgres, b.Log) }
		if s.MigrateInBackground {
			r.Add("migrations", lifecycle.Once(migrate))
		} else {
			r.Wait("postgres migrations", migrate)
		}
	}
	return r
}
