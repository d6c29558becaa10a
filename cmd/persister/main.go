// Command persister is one member of the consumer group that writes the
// topic read-receipts to Postgres (see pkg/persister). It serves /metrics,
// /healthz, /readyz and pprof on the admin address, applies the embedded
// migrations at start-up (unless --migrate=false), and drains on SIGINT or
// SIGTERM: the batch in hand is finished, committed, and the group left.
//
//	persister [flags]          run
//	persister migrate [flags]  apply the migrations and exit (the Helm hook)
//
// Every flag can also be set from the environment: --pg-url from
// RECEIPTS_PG_URL, and so on (the flag wins).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/flagenv"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/logging"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
)

// AdminAddrDefault is the persister's admin port on the dev stack.
const AdminAddrDefault = "127.0.0.1:9101"

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "persister:", err)
		os.Exit(1)
	}
}

type config struct {
	brokers            flagenv.List
	sessionTimeout     time.Duration
	clientID           string
	topic              string
	dltTopic           string
	group              string
	pgURL              string
	pgMaxConns         int
	writers            int
	maxPollRecords     int
	linger             time.Duration
	lagInterval        time.Duration
	drainTimeout       time.Duration
	dltDeliveryTimeout time.Duration
	retryBase          time.Duration
	retryCap           time.Duration
	adminAddr          string
	migrate            bool
	log                logging.Flags
}

func run(args []string, stderr io.Writer) error {
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
	log, err := cfg.log.New("persister")
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	store, err := pgstore.Open(ctx, pgstore.Config{URL: cfg.pgURL, MaxConns: int32(poolSize(cfg.pgMaxConns, cfg.writers))})
	if err != nil {
		return err
	}
	defer store.Close()
	if migrateOnly {
		return migrate(ctx, store, log)
	}
	return serve(ctx, cfg, store, log)
}

// poolSize is the Postgres pool size: the flag when set, else enough for
// every writer plus one connection for readiness pings (at least the
// store's default; the migrate subcommand has no writers).
func poolSize(flagValue, writers int) int {
	if flagValue > 0 {
		return flagValue
	}
	return max(pgstore.MaxConnsDefault, writers+1)
}

func newFlagSet(cfg *config, migrateOnly bool, out io.Writer) *flag.FlagSet {
	name := "persister"
	if migrateOnly {
		name = "persister migrate"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.pgURL, "pg-url", pgstore.URLDefault, "Postgres connection URL")
	cfg.log.Register(fs)
	if !migrateOnly {
		fs.Var(&cfg.brokers, "brokers", "Kafka seed brokers, a comma-separated `host:port` list")
		fs.StringVar(&cfg.clientID, "client-id", persister.ClientIDDefault, "Kafka client id")
		fs.DurationVar(&cfg.sessionTimeout, "session-timeout", kafkaconf.SessionTimeoutDefault, "consumer-group session timeout: how long a crashed member holds its partitions")
		fs.StringVar(&cfg.topic, "topic", event.TopicDefault, "topic to consume")
		fs.StringVar(&cfg.dltTopic, "dlt-topic", event.DLTTopicDefault, "dead-letter topic for undecodable and rejected records")
		fs.StringVar(&cfg.group, "group", persister.GroupDefault, "consumer group")
		fs.IntVar(&cfg.pgMaxConns, "pg-max-conns", 0, fmt.Sprintf("Postgres pool size, at least --writers; 0 = --writers + 1 (a connection left for readiness pings), and at least %d", pgstore.MaxConnsDefault))
		fs.IntVar(&cfg.writers, "writers", persister.WritersDefault, "shards of a batch written concurrently, each in its own transaction on its own connection (split by user id); 1 = one transaction per batch")
		fs.IntVar(&cfg.maxPollRecords, "max-poll-records", persister.MaxPollRecordsDefault, "most records in one batch (one transaction per writer)")
		fs.DurationVar(&cfg.linger, "linger", persister.LingerDefault, "keep polling this long after the first records to coalesce a fuller batch; 0 = one poll per batch")
		fs.DurationVar(&cfg.drainTimeout, "drain-timeout", persister.DrainTimeoutDefault, "on shutdown, how long to finish and commit the batch in hand and leave the group")
		fs.DurationVar(&cfg.lagInterval, "lag-interval", persister.LagIntervalDefault, "how often the group's consumer lag is exported as receipts_persister_consumer_lag_records; negative disables")
		fs.DurationVar(&cfg.dltDeliveryTimeout, "dlt-delivery-timeout", persister.DLTDeliveryTimeoutDefault, "bound of one attempt to produce dead letters before retrying")
		fs.DurationVar(&cfg.retryBase, "retry-base", 100*time.Millisecond, "first backoff while Postgres or the dead-letter topic is unavailable")
		fs.DurationVar(&cfg.retryCap, "retry-cap", 10*time.Second, "longest backoff while Postgres or the dead-letter topic is unavailable (retries never give up)")
		fs.StringVar(&cfg.adminAddr, "admin-addr", AdminAddrDefault, "admin listen address (/metrics /healthz /readyz pprof)")
		fs.BoolVar(&cfg.migrate, "migrate", true, "apply the embedded migrations at start-up")
	}
	fs.Usage = func() { usage(fs, migrateOnly) }
	return fs
}

// usage lists every flag with its environment variable and its default,
// zero defaults included (flag.PrintDefaults leaves those out).
func usage(fs *flag.FlagSet, migrateOnly bool) {
	w := fs.Output()
	if migrateOnly {
		fmt.Fprintf(w, "Usage: persister migrate [flags]\n\nApplies the embedded Postgres migrations and exits.\n\nFlags:\n")
	} else {
		fmt.Fprintf(w, "Usage: persister [flags]\n       persister migrate [flags]\n\n"+
			"Consumes the receipts topic and writes the greatest value per key to Postgres,\n"+
			"committing offsets only after the database commit.\n\nFlags:\n")
	}
	flagenv.PrintDefaults(fs)
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

func serve(ctx context.Context, cfg config, store *pgstore.Store, log *zap.Logger) error {
	reg := admin.NewRegistry()
	var p atomic.Pointer[persister.Persister]
	ready := func(ctx context.Context) error {
		if pp := p.Load(); pp != nil {
			return pp.Ready(ctx)
		}
		return errors.New("starting")
	}
	if err := admin.Serve(ctx, admin.Config{Addr: cfg.adminAddr, Gatherer: reg, Ready: ready, Logger: log}); err != nil {
		return fmt.Errorf("serving admin on %s: %w", cfg.adminAddr, err)
	}
	log.Info("admin serving", zap.String("addr", cfg.adminAddr))
	if cfg.migrate {
		if err := migrate(ctx, store, log); err != nil {
			return err
		}
	}
	per, err := persister.New(persister.Config{
		Kafka:              kafkaconf.Config{Brokers: cfg.brokers, ClientID: cfg.clientID, SessionTimeout: cfg.sessionTimeout},
		Topic:              cfg.topic,
		DLTTopic:           cfg.dltTopic,
		Group:              cfg.group,
		Store:              store,
		MaxPollRecords:     cfg.maxPollRecords,
		Writers:            cfg.writers,
		Linger:             cfg.linger,
		DrainTimeout:       cfg.drainTimeout,
		LagInterval:        cfg.lagInterval,
		DLTDeliveryTimeout: cfg.dltDeliveryTimeout,
		Retry:              backoff.Config{Base: cfg.retryBase, Cap: cfg.retryCap},
		Logger:             log,
		Registerer:         reg,
	})
	if err != nil {
		return err
	}
	defer per.Close()
	p.Store(per)
	return per.Run(ctx)
}
