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
	"flag"
	"io"

	"go.uber.org/zap"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Defaults of the flags that have no package default.
const (
	AdminAddrDefault = "127.0.0.1:9102"
	ClientIDDefault  = "receipts-dlt-reconciler"
)

func main() { cli.Main("dlt-reconciler", run) }

// config is everything the reconciler's command line sets.
type config struct {
	svc   cli.Service
	redis redisstore.ClientConfig
	dlt   deadletter.Config
	sweep drift.Config
	// sweepOn is --sweep: run the drift sweep beside the consumer.
	sweepOn bool
}

func newConfig() *config {
	return &config{
		svc: cli.Service{
			Name: "dlt-reconciler",
			About: "Repairs dead letters into Postgres and Redis by the max rule (parking what cannot\n" +
				"be repaired) and sweeps Redis and Postgres for drift, repairing both ways.",
			Admin: admin.Config{Addr: AdminAddrDefault},
		},
		dlt: deadletter.Config{Kafka: kafkaconf.Config{ClientID: ClientIDDefault}},
	}
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	c.dlt.Kafka.RegisterFlags(fs)
	c.dlt.Kafka.RegisterGroupFlags(fs)
	c.redis.RegisterFlags(fs)
	c.dlt.RegisterFlags(fs)
	fs.BoolVar(&c.sweepOn, "sweep", true, "run the drift sweep")
	c.sweep.Interval = drift.IntervalDefault
	fs.DurationVar(&c.sweep.Interval, "sweep-interval", c.sweep.Interval, "pause between drift sweeps")
	c.sweep.RegisterFlagsWithPrefix("sweep-", fs)
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c := newConfig()
	if err := c.svc.Parse(args, stderr, c.registerFlags); err != nil {
		return err
	}
	log, err := c.svc.Logger()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	pg, err := pgstore.Open(ctx, c.svc.Postgres)
	if err != nil {
		return err
	}
	defer pg.Close()
	if c.svc.MigrateOnly {
		return cli.RunMigrations(ctx, pg, log)
	}

	rdb, err := c.redis.NewClient()
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	rs := redisstore.New(rdb, c.redis.StoreConfig())
	reg := admin.NewRegistry()

	c.dlt.Postgres, c.dlt.Redis, c.dlt.Logger, c.dlt.Registerer = pg, rs, log, reg
	cons, err := deadletter.NewConsumer(c.dlt)
	if err != nil {
		return err
	}
	defer cons.Close()

	r := c.svc.Runner(log, reg)
	if c.svc.Migrate {
		// Nothing works without Postgres: wait for it as long as it is
		// unreachable; an error it answers with stops the service.
		r.Wait("postgres migrations", func(ctx context.Context) error { return cli.RunMigrations(ctx, pg, log) })
	}
	r.Wait("redis scripts", func(ctx context.Context) error {
		if err := rs.Load(ctx); err != nil {
			// Not fatal: a merge loads the scripts again on NOSCRIPT.
			log.Warn("loading redis scripts; continuing degraded", zap.Error(err))
		}
		return nil
	})
	r.Add("dead-letter consumer", cons)
	if c.sweepOn {
		c.sweep.Postgres, c.sweep.Redis, c.sweep.Logger, c.sweep.Registerer = pg, rs, log, reg
		sw, err := drift.New(c.sweep)
		if err != nil {
			return err
		}
		r.Add("drift sweep", sw)
	}
	return r.Run(ctx)
}
