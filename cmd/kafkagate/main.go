// Command kafkagate is the receipts gateway (see pkg/gate). One port serves
// the ReceiptService as gRPC, gRPC-Web, Connect and HTTP/JSON, with gRPC
// reflection and health; the admin address serves /metrics, /healthz,
// /readyz and pprof. It applies the embedded Postgres migrations at start-up
// (unless --migrate=false) in the background, so a Postgres outage never
// stops marks from being accepted, and drains in-flight calls on SIGINT or
// SIGTERM before stopping the spool replayer and closing the producer.
//
// Marks Kafka does not ack within --spool-after are appended to a local,
// fsynced spool in --spool-dir (answered with durability SPOOLED) and
// replayed to Kafka in order once it acks again, also after a crash or a
// restart. The dev default, .devdata/spool, is relative to the working
// directory (git-ignored at the repository root); in a container point it at
// a persistent volume, one per replica. --spool-dir "" disables the spool:
// Kafka failures then answer 503.
//
//	kafkagate [flags]          run
//	kafkagate migrate [flags]  apply the migrations and exit
//
// Every flag can also be set from the environment: --redis-url from
// RECEIPTS_REDIS_URL, and so on (the flag wins).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/flagenv"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/logging"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Dev-stack defaults.
const (
	AdminAddrDefault = "127.0.0.1:9100"
	RedisURLDefault  = "redis://127.0.0.1:6379/0"
	ClientIDDefault  = "kafkagate"
	// SpoolDirDefault is the dev stack's spool, under the git-ignored
	// .devdata of the repository when run from its root.
	SpoolDirDefault = ".devdata/spool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkagate:", err)
		os.Exit(1)
	}
}

type config struct {
	listen          string
	adminAddr       string
	brokers         flagenv.List
	clientID        string
	topic           string
	produceTimeout  time.Duration
	produceLinger   time.Duration
	spoolDir        string
	spoolMaxBytes   int64
	spoolAfter      time.Duration
	retryAfter      time.Duration
	redisURL        string
	redisPrefix     string
	redisTimeout    time.Duration
	pgURL           string
	pgMaxConns      int
	pgTimeout       time.Duration
	maxBatchItems   int
	maxReadChannels int
	maxBodyBytes    int64
	readHeader      time.Duration
	readTimeout     time.Duration
	writeTimeout    time.Duration
	idleTimeout     time.Duration
	shutdownTimeout time.Duration
	migrate         bool
	log             logging.Flags
}

// run parses args and runs until ctx ends (main's signal context).
func run(ctx context.Context, args []string, stderr io.Writer) error {
	migrateOnly := len(args) > 0 && args[0] == "migrate"
	if migrateOnly {
		args = args[1:]
	}
	cfg := config{brokers: flagenv.List{kafkaconf.BrokersDefault}}
	fs := newFlagSet(&cfg, migrateOnly, stderr)
	if err := flagenv.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	log, err := cfg.log.New("kafkagate")
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	store, err := pgstore.Open(ctx, pgstore.Config{URL: cfg.pgURL, MaxConns: int32(cfg.pgMaxConns)})
	if err != nil {
		return err
	}
	defer store.Close()
	if migrateOnly {
		return migrate(ctx, store, log)
	}
	return serve(ctx, cfg, store, log)
}

func newFlagSet(cfg *config, migrateOnly bool, out io.Writer) *flag.FlagSet {
	name := "kafkagate"
	if migrateOnly {
		name = "kafkagate migrate"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.pgURL, "pg-url", pgstore.URLDefault, "Postgres connection URL (read fallback and migrations)")
	cfg.log.Register(fs)
	if !migrateOnly {
		fs.StringVar(&cfg.listen, "listen", gate.AddrDefault, "API listen address: gRPC, gRPC-Web, Connect and HTTP/JSON on one port (HTTP/1.1 and h2c)")
		fs.StringVar(&cfg.adminAddr, "admin-addr", AdminAddrDefault, "admin listen address (/metrics /healthz /readyz pprof)")
		fs.Var(&cfg.brokers, "brokers", "Kafka seed brokers, a comma-separated `host:port` list")
		fs.StringVar(&cfg.clientID, "client-id", ClientIDDefault, "Kafka client id")
		fs.StringVar(&cfg.topic, "topic", gate.TopicDefault, "topic receiving every mark, keyed user:channel")
		fs.DurationVar(&cfg.produceTimeout, "produce-timeout", gate.ProduceTimeoutDefault, "bound on waiting for the acks of one call without a spool (past it the call answers Unavailable) and of one replayed spool batch (>= 1s)")
		fs.DurationVar(&cfg.produceLinger, "produce-linger", gate.ProduceLingerDefault, "producer linger; every call waits for its acks, so keep it short (negative: none)")
		fs.StringVar(&cfg.spoolDir, "spool-dir", SpoolDirDefault, "directory of the local spool for marks Kafka does not ack in time (one gate per directory; a persistent volume in production); empty disables it and Kafka failures answer 503")
		fs.Int64Var(&cfg.spoolMaxBytes, "spool-max-bytes", gate.SpoolMaxBytesDefault, "bound on the spool's files; a call that does not fit answers 503 with Retry-After")
		fs.DurationVar(&cfg.spoolAfter, "spool-after", gate.SpoolAfterDefault, "bound on waiting for Kafka's acks before spooling a call (with --spool-dir)")
		fs.DurationVar(&cfg.retryAfter, "retry-after", gate.RetryAfterDefault, "Retry-After hint (whole seconds) sent with Unavailable answers of writes")
		fs.StringVar(&cfg.redisURL, "redis-url", RedisURLDefault, "Redis URL of the real-time view")
		fs.StringVar(&cfg.redisPrefix, "redis-prefix", redisstore.PrefixDefault, "prefix of every Redis key")
		fs.DurationVar(&cfg.redisTimeout, "redis-timeout", gate.RedisTimeoutDefault, "bound on each Redis call; past it the answer is realtime_degraded")
		fs.IntVar(&cfg.pgMaxConns, "pg-max-conns", pgstore.MaxConnsDefault, "Postgres pool size")
		fs.DurationVar(&cfg.pgTimeout, "pg-timeout", gate.PostgresTimeoutDefault, "bound on each Postgres read")
		fs.IntVar(&cfg.maxBatchItems, "max-batch-items", gate.MaxBatchItemsDefault, "most receipts in one MarkReceipts call")
		fs.IntVar(&cfg.maxReadChannels, "max-read-channels", gate.MaxReadChannelsDefault, "most channel ids in one GetReadState call")
		fs.Int64Var(&cfg.maxBodyBytes, "max-body-bytes", gate.MaxBodyBytesDefault, "largest request body (REST: 413) or message (RPC: ResourceExhausted)")
		fs.DurationVar(&cfg.readHeader, "read-header-timeout", gate.ReadHeaderTimeoutDefault, "HTTP server: bound on reading request headers")
		fs.DurationVar(&cfg.readTimeout, "read-timeout", gate.ReadTimeoutDefault, "HTTP server: bound on reading a whole request")
		fs.DurationVar(&cfg.writeTimeout, "write-timeout", gate.WriteTimeoutDefault, "HTTP server: bound on a whole call; must exceed redis-timeout + produce-timeout")
		fs.DurationVar(&cfg.idleTimeout, "idle-timeout", gate.IdleTimeoutDefault, "HTTP server: keep-alive idle bound")
		fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", gate.ShutdownTimeoutDefault, "on SIGINT/SIGTERM, how long in-flight calls may finish")
		fs.BoolVar(&cfg.migrate, "migrate", true, "apply the embedded migrations at start-up (in the background: serving does not wait)")
	}
	fs.Usage = func() { usage(fs, migrateOnly) }
	return fs
}

// usage lists every flag with its environment variable and its default,
// zero defaults included (flag.PrintDefaults leaves those out).
func usage(fs *flag.FlagSet, migrateOnly bool) {
	w := fs.Output()
	if migrateOnly {
		fmt.Fprintf(w, "Usage: kafkagate migrate [flags]\n\nApplies the embedded Postgres migrations and exits.\n\nFlags:\n")
	} else {
		fmt.Fprintf(w, "Usage: kafkagate [flags]\n       kafkagate migrate [flags]\n\n"+
			"Serves the receipts API (gRPC, gRPC-Web, Connect, HTTP/JSON) on one port: marks are\n"+
			"max-merged into Redis and produced to Kafka with acks=all before the answer, or\n"+
			"spooled to a local fsynced spool when Kafka does not ack in time.\n\nFlags:\n")
	}
	flagenv.PrintDefaults(fs)
}

func serve(ctx context.Context, cfg config, store *pgstore.Store, log *zap.Logger) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	ropt, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return fmt.Errorf("parsing redis url: %w", err)
	}
	// go-redis retries a failed dial 5 times 100ms apart by default; one
	// try makes a refused connection degrade an answer at once instead of
	// using up the whole --redis-timeout.
	if ropt.DialerRetries == 0 {
		ropt.DialerRetries = 1
	}
	rdb := redis.NewClient(ropt)
	defer func() { _ = rdb.Close() }()

	reg := admin.NewRegistry()
	g, err := gate.New(gate.Config{
		Addr:              cfg.listen,
		Kafka:             kafkaconf.Config{Brokers: cfg.brokers, ClientID: cfg.clientID},
		Topic:             cfg.topic,
		ProduceTimeout:    cfg.produceTimeout,
		ProduceLinger:     cfg.produceLinger,
		SpoolDir:          cfg.spoolDir,
		SpoolMaxBytes:     cfg.spoolMaxBytes,
		SpoolAfter:        cfg.spoolAfter,
		RetryAfter:        cfg.retryAfter,
		Redis:             rdb,
		RedisPrefix:       cfg.redisPrefix,
		RedisTimeout:      cfg.redisTimeout,
		Postgres:          store,
		PostgresTimeout:   cfg.pgTimeout,
		MaxBatchItems:     cfg.maxBatchItems,
		MaxReadChannels:   cfg.maxReadChannels,
		MaxBodyBytes:      cfg.maxBodyBytes,
		ReadHeaderTimeout: cfg.readHeader,
		ReadTimeout:       cfg.readTimeout,
		WriteTimeout:      cfg.writeTimeout,
		IdleTimeout:       cfg.idleTimeout,
		ShutdownTimeout:   cfg.shutdownTimeout,
		Logger:            log,
		Registerer:        reg,
	})
	if err != nil {
		return err
	}
	// Runs after the server has drained (defers run last-in first-out).
	defer g.Close()

	if err := admin.Serve(ctx, admin.Config{Addr: cfg.adminAddr, Gatherer: reg, Ready: g.Ready, Logger: log}); err != nil {
		return fmt.Errorf("serving admin on %s: %w", cfg.adminAddr, err)
	}
	log.Info("admin serving", zap.String("addr", cfg.adminAddr))
	if cfg.migrate {
		// Postgres only serves the read fallback: the gate accepts marks
		// while it waits. A migration that fails for good stops the process.
		go func() {
			if err := migrate(ctx, store, log); err != nil && ctx.Err() == nil {
				cancel(err)
			}
		}()
	}
	log.Info("api serving", zap.String("addr", cfg.listen), zap.Strings("brokers", cfg.brokers),
		zap.String("topic", cfg.topic), zap.String("redis_prefix", cfg.redisPrefix), zap.String("spool_dir", cfg.spoolDir))
	err = g.ListenAndServe(ctx)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err == nil {
		log.Info("drained; stopping")
	}
	return err
}

// migrate applies the migrations, waiting for Postgres while it cannot be
// reached (a pod may start before its database).
func migrate(ctx context.Context, store *pgstore.Store, log *zap.Logger) error {
	applied, err := store.MigrateWhenReachable(ctx, func(err error) {
		log.Warn("waiting for postgres to migrate", zap.Error(err))
	})
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	log.Info("migrations applied", zap.Strings("applied", applied))
	return nil
}
