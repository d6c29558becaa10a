// Command persister is one member of the consumer group that writes the
// topic read-receipts to Postgres (see pkg/persister). It serves /metrics,
// /healthz, /readyz (and pprof with --pprof) on the admin address, applies the embedded
// migrations at start-up (unless --migrate=false), and drains on SIGINT or
// SIGTERM: the batch in hand is finished, committed, and the group left.
// Beside it runs the cursor-move log's partition upkeep (pkg/movelog).
//
//	persister [flags]          run
//	persister migrate [flags]  apply the migrations and exit (the Helm hook)
//
// Every flag can also be set from the environment: --pg-url from
// RECEIPTS_PG_URL, and so on (the flag wins).
package main

import (
	"cmp"
	"context"
	"flag"
	"io"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/movelog"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
)

// AdminAddrDefault is the persister's admin port on the dev stack.
const AdminAddrDefault = "127.0.0.1:9101"

func main() { cli.Main("persister", run) }

// config is everything the persister's command line sets.
type config struct {
	svc cli.Service
	per persister.Config
}

func newConfig() *config {
	return &config{
		svc: cli.Service{
			Name: "persister",
			About: "Consumes the receipts topic and writes the greatest value per key to Postgres,\n" +
				"committing offsets only after the database commit.",
			Admin: admin.Config{Addr: AdminAddrDefault},
			// 0: persister.PoolSize (a connection per writer, and one more).
			Postgres: pgstore.Config{MaxConns: 0},
		},
		per: persister.Config{Kafka: kafkaconf.Config{ClientID: persister.ClientIDDefault}},
	}
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	c.per.Kafka.RegisterFlags(fs)
	c.per.Kafka.RegisterGroupFlags(fs)
	c.per.RegisterFlags(fs)
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c := newConfig()
	c.svc.PoolSize = func(maxConns int32) int32 { return persister.PoolSize(maxConns, max(c.per.Writers, 1)) }
	b, done, err := c.svc.Boot(ctx, args, stderr, c.registerFlags)
	if done {
		return err
	}
	defer b.Close()
	c.per.Store, c.per.Logger, c.per.Registerer, c.per.Tracing = b.Postgres, b.Log, b.Registry, b.Tracing
	per, err := persister.New(c.per)
	if err != nil {
		return err
	}
	defer per.Close()

	upkeep, err := movelog.New(movelog.Config{Postgres: b.Postgres,
		Retention: cmp.Or(c.per.MoveRetention, persister.MoveRetentionDefault), Logger: b.Log})
	if err != nil {
		return err
	}

	r := c.svc.Runner(b)
	r.Add("move-log upkeep", upkeep)
	r.Add("persister", per)
	if lag := per.LagExporter(); lag != nil {
		// Added last so it stops first: Close closes its client.
		r.Add("lag exporter", lag)
	}
	return r.Run(ctx)
}
