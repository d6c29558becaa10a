// Command dlt-reconciler consumes the dead-letter topic, repairs each
// record into Postgres and Redis by the max rule (or parks it for an
// operator), and runs the drift sweep between Redis and Postgres.
//
//	dlt-reconciler [flags]          run the service
//	dlt-reconciler migrate [flags]  apply the embedded migrations and exit
//
// Every flag can also be set as RECEIPTS_<FLAG_NAME> (see --help).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/flagenv"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/logging"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/reconcile"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Defaults of the flags that have no package default.
const (
	AdminAddrDefault = "127.0.0.1:9102"
	RedisURLDefault  = "redis://127.0.0.1:6379/0"
	ClientIDDefault  = "receipts-dlt-reconciler"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dlt-reconciler:", err)
		os.Exit(1)
	}
}

type config struct {
	adminAddr      string
	brokers        flagenv.List
	sessionTimeout time.Duration
	clientID       string
	kafkaFast      bool
	dltTopic       string
	group          string
	pgURL          string
	pgMaxConns     int
	redisURL       string
	redisPrefix    string
	maxPoll        int
	retryMax       time.Duration
	attemptTimeout time.Duration
	sweep          bool
	sweepInterval  time.Duration
	sweepPage      int
	sweepRate      float64
	sweepScanCount int64
	sweepGrace     time.Duration
	migrate        bool
	log            logging.Flags
}

func parseFlags(name string, args []string) (*config, error) {
	c := &config{brokers: flagenv.List{kafkaconf.BrokersDefault}}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&c.adminAddr, "admin-addr", AdminAddrDefault, "admin listen address (/metrics, /healthz, /readyz, pprof)")
	fs.Var(&c.brokers, "brokers", "Kafka seed brokers, comma-separated")
	fs.StringVar(&c.clientID, "client-id", ClientIDDefault, "Kafka client id")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", kafkaconf.SessionTimeoutDefault, "consumer-group session timeout: how long a crashed member holds its partitions")
	fs.BoolVar(&c.kafkaFast, "kafka-fast", false, "short Kafka metadata and retry timers (dev stack, tests)")
	fs.StringVar(&c.dltTopic, "dlt-topic", event.DLTTopicDefault, "dead-letter topic to consume")
	fs.StringVar(&c.group, "group", reconcile.GroupDefault, "consumer group")
	fs.StringVar(&c.pgURL, "pg-url", pgstore.URLDefault, "Postgres URL")
	fs.IntVar(&c.pgMaxConns, "pg-max-conns", pgstore.MaxConnsDefault, "Postgres pool size")
	fs.StringVar(&c.redisURL, "redis-url", RedisURLDefault, "Redis URL")
	fs.StringVar(&c.redisPrefix, "redis-prefix", redisstore.PrefixDefault, "Redis key prefix")
	fs.IntVar(&c.maxPoll, "max-poll-records", reconcile.MaxPollRecordsDefault, "dead letters per poll")
	fs.DurationVar(&c.retryMax, "retry-max-duration", reconcile.RetryMaxDurationDefault, "how long one dead letter is retried before it is parked")
	fs.DurationVar(&c.attemptTimeout, "attempt-timeout", reconcile.AttemptTimeoutDefault, "bound of one repair attempt")
	fs.BoolVar(&c.sweep, "sweep", true, "run the drift sweep")
	fs.DurationVar(&c.sweepInterval, "sweep-interval", reconcile.SweepIntervalDefault, "pause between drift sweeps")
	fs.IntVar(&c.sweepPage, "sweep-page-size", reconcile.SweepPageSizeDefault, "Postgres rows per sweep page")
	fs.Float64Var(&c.sweepRate, "sweep-pages-per-second", reconcile.SweepPagesPerSecondDefault, "sweep page rate limit")
	fs.Int64Var(&c.sweepScanCount, "sweep-scan-count", reconcile.SweepScanCountDefault, "COUNT hint of one Redis SCAN page")
	fs.DurationVar(&c.sweepGrace, "sweep-grace", reconcile.SweepGraceDefault, "keys whose Redis value moved more recently are in flight, not drift (negative: none)")
	fs.BoolVar(&c.migrate, "migrate", true, "apply the embedded migrations at start-up")
	c.log.Register(fs)
	if err := flagenv.Parse(fs, args); err != nil {
		return nil, err
	}
	return c, nil
}

func run(args []string) error {
	migrateOnly := len(args) > 0 && args[0] == "migrate"
	if migrateOnly {
		args = args[1:]
	}
	cfg, err := parseFlags("dlt-reconciler", args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := cfg.log.New("dlt-reconciler")
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	pg, err := pgstore.Open(ctx, pgstore.Config{URL: cfg.pgURL, MaxConns: int32(cfg.pgMaxConns)})
	if err != nil {
		return err
	}
	defer pg.Close()

	if migrateOnly {
		applied, err := pg.Migrate(ctx)
		if err != nil {
			return err
		}
		log.Info("migrations applied", zap.Strings("versions", applied))
		return nil
	}
	return serve(ctx, cfg, log, pg)
}

func serve(ctx context.Context, cfg *config, log *zap.Logger, pg *pgstore.Store) error {
	ropt, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return fmt.Errorf("parsing redis url: %w", err)
	}
	rdb := redis.NewClient(ropt)
	defer func() { _ = rdb.Close() }()
	rs := redisstore.New(rdb, redisstore.Config{Prefix: cfg.redisPrefix})

	reg := admin.NewRegistry()
	cons, err := reconcile.NewConsumer(reconcile.ConsumerConfig{
		Postgres:       pg,
		Redis:          rs,
		Kafka:          kafkaconf.Config{Brokers: cfg.brokers, ClientID: cfg.clientID, SessionTimeout: cfg.sessionTimeout, Fast: cfg.kafkaFast},
		DLTTopic:       cfg.dltTopic,
		Group:          cfg.group,
		MaxPollRecords: cfg.maxPoll,
		Retry:          backoff.Config{MaxDuration: cfg.retryMax},
		AttemptTimeout: cfg.attemptTimeout,
		Logger:         log,
		Registerer:     reg,
	})
	if err != nil {
		return err
	}
	defer cons.Close()
	var sw *reconcile.Sweeper
	if cfg.sweep {
		sw, err = reconcile.NewSweeper(reconcile.SweepConfig{
			Postgres:       pg,
			Redis:          rs,
			Interval:       cfg.sweepInterval,
			PageSize:       cfg.sweepPage,
			PagesPerSecond: cfg.sweepRate,
			ScanCount:      cfg.sweepScanCount,
			Grace:          cfg.sweepGrace,
			Logger:         log,
			Registerer:     reg,
		})
		if err != nil {
			return err
		}
	}

	// The admin port comes up first so /readyz explains a slow start.
	startedOK := make(chan struct{})
	ready := func(ctx context.Context) error {
		select {
		case <-startedOK:
			return cons.Ready(ctx)
		default:
			return errors.New("starting: waiting for postgres migrations")
		}
	}
	if err := admin.Serve(ctx, admin.Config{Addr: cfg.adminAddr, Gatherer: reg, Ready: ready, Logger: log}); err != nil {
		return fmt.Errorf("serving admin on %s: %w", cfg.adminAddr, err)
	}

	if cfg.migrate {
		// Nothing works without Postgres, so wait for it as long as it is
		// unreachable; an error it answers with (bad migration, missing
		// database) stops the service instead of looping.
		applied, err := pg.MigrateWhenReachable(ctx, func(err error) {
			log.Warn("waiting for postgres to migrate", zap.Error(err))
		})
		if len(applied) > 0 {
			log.Info("migrations applied", zap.Strings("versions", applied))
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	if err := rs.Load(ctx); err != nil {
		// Not fatal: Merge loads the scripts again on NOSCRIPT.
		log.Warn("loading redis scripts; continuing degraded", zap.Error(err))
	}
	close(startedOK)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := cons.Run(runCtx); err != nil {
			errc <- fmt.Errorf("consuming dead letters: %w", err)
			cancel()
		}
	}()
	if sw != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sw.Run(runCtx); err != nil {
				errc <- fmt.Errorf("sweeping drift: %w", err)
				cancel()
			}
		}()
	}
	log.Info("dlt-reconciler running", zap.String("admin_addr", cfg.adminAddr), zap.String("dlt_topic", cfg.dltTopic),
		zap.String("group", cfg.group), zap.Bool("sweep", cfg.sweep), zap.Duration("sweep_interval", cfg.sweepInterval))
	<-runCtx.Done()
	log.Info("shutting down")
	wg.Wait()
	close(errc)
	return <-errc
}
