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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
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
	c := &config{
		svc: cli.Service{
			Name: "dlt-reconciler",
			About: "Repairs dead letters into Postgres and Redis by the max rule (parking what cannot\n" +
				"be repaired) and sweeps Redis and Postgres for drift, repairing both ways.",
			Admin: admin.Config{Addr: AdminAddrDefault},
		},
		dlt: deadletter.Config{Kafka: kafkaconf.Config{ClientID: ClientIDDefault}},
	}
	c.svc.Redis = &c.redis
	return c
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	c.dlt.Kafka.RegisterFlags(fs)
	c.dlt.Kafka.RegisterGroupFlags(fs)
	c.dlt.RegisterFlags(fs)
	fs.BoolVar(&c.sweepOn, "sweep", true, "run the drift sweep")
	c.sweep.Interval = drift.IntervalDefault
	fs.DurationVar(&c.sweep.Interval, "sweep-interval", c.sweep.Interval, "pause between drift sweeps")
	c.sweep.LeaderElection, c.sweep.LeaderCheckInterval = drift.LeaderPostgres, drift.LeaderCheckIntervalDefault
	fs.StringVar(&c.sweep.LeaderElection, "sweep-leader-election", c.sweep.LeaderElection,
		"one drift sweep per cluster: postgres (the replica holding a Postgres advisory lock sweeps, the others stand by) or none (every replica sweeps)")
	fs.DurationVar(&c.sweep.LeaderCheckInterval, "sweep-leader-check-interval", c.sweep.LeaderCheckInterval,
		"how often the sweep's leader checks its lock session and a standby tries to take over")
	c.sweep.RegisterFlagsWithPrefix("sweep-", fs)
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c := newConfig()
	b, done, err := c.svc.Boot(ctx, args, stderr, c.registerFlags)
	if done {
		return err
	}
	defer b.Close()
	rsc := c.redis.StoreConfig()
	// The sweep and the repairs read Redis: a field they cannot decode is
	// skipped and counted, never failing a page.
	rsc.Undecodable = promauto.With(b.Registry).NewCounter(prometheus.CounterOpts{
		Namespace: "receipts", Subsystem: deadletter.MetricsSubsystem, Name: "redis_undecodable_fields_total",
		Help: "Stored Redis fields a read skipped because they could not be decoded (read as absent; the sweep rewrites them from Postgres).",
	})
	rs := redisstore.New(b.Redis, rsc)

	c.dlt.Postgres, c.dlt.Redis, c.dlt.Logger, c.dlt.Registerer, c.dlt.Tracing = b.Postgres, rs, b.Log, b.Registry, b.Tracing
	cons, err := deadletter.NewConsumer(c.dlt)
	if err != nil {
		return err
	}
	defer cons.Close()

	r := c.svc.Runner(b)
	r.Wait("redis scripts", func(ctx context.Context) error {
		if err := rs.Load(ctx, kind.Scripts(kinds.All())...); err != nil {
			// Not fatal: a merge loads the scripts again on NOSCRIPT.
			b.Log.Warn("loading redis scripts; continuing degraded", zap.Error(err))
		}
		return nil
	})
	r.Wait("shared settings", cons.AgreeSettings)
	r.Add("dead-letter consumer", cons)
	if c.sweepOn {
		c.sweep.Postgres, c.sweep.Redis, c.sweep.Logger, c.sweep.Registerer = b.Postgres, rs, b.Log, b.Registry
		c.sweep.MentionCap = c.dlt.MentionCap
		sw, err := drift.New(c.sweep)
		if err != nil {
			return err
		}
		r.Add("drift sweep", sw)
	}
	return r.Run(ctx)
}
