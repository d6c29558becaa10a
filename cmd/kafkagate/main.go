// Command kafkagate is the receipts gateway (see pkg/gate, served by
// pkg/gate/server). One port serves
// the ReceiptService as gRPC, gRPC-Web, Connect and HTTP/JSON, with gRPC
// reflection and health; the admin address serves /metrics, /healthz,
// /readyz and, with --pprof, pprof. It applies the embedded Postgres migrations at start-up
// (unless --migrate=false) in the background, so a Postgres outage never
// stops marks from being accepted. On SIGINT or SIGTERM readiness fails at
// once (/readyz and gRPC health), the API keeps serving for
// --shutdown-delay (while the load balancers stop routing here), then it
// drains in-flight calls, stops the spool replayer and closes the producer.
//
// Marks Kafka does not ack within --spool-after are appended to a local,
// fsynced spool in --spool-dir (answered with durability SPOOLED) and
// replayed to Kafka in order once it acks again, also after a crash or a
// restart. The dev default, .devdata/spool, is relative to the working
// directory (git-ignored at the repository root); in a container point it at
// a persistent volume, one per replica. --spool-dir "" disables the spool:
// Kafka failures then answer 503.
//
// The API authenticates its callers (pkg/apiauth): server bearer tokens
// from --auth-token-file, client certificates with --tls-client-ca-file
// (TLS with --tls-cert-file and --tls-key-file), and end-user tokens
// (JWTs acting for their own user only: --auth-jwt-hs256-key-file, or
// --auth-jwks-url / --auth-jwks-file with --auth-jwt-audience); it limits
// each server client to --rate-limit events/s and each end-user to
// --rate-limit-user (on by default). Without authentication it serves
// only a loopback --listen address, unless --insecure-allow-unauthenticated.
//
//	kafkagate [flags]          run
//	kafkagate migrate [flags]  apply the migrations and exit
//
// Every flag can also be set from the environment: --redis-url from
// RECEIPTS_REDIS_URL, and so on (the flag wins).
package main

import (
	"context"
	"flag"
	"io"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/admin"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/gate/server"
	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/views/readby"
	"github.com/readstate/receipts/pkg/watch"
)

// Dev-stack defaults.
const (
	AdminAddrDefault = "127.0.0.1:9100"
	ClientIDDefault  = "kafkagate"
	// SpoolDirDefault is the dev stack's spool, under the git-ignored
	// .devdata of the repository when run from its root.
	SpoolDirDefault = ".devdata/spool"
)

func main() { cli.Main("kafkagate", run) }

// config is everything kafkagate's command line sets.
type config struct {
	svc   cli.Service
	redis redisstore.ClientConfig
	prod  producer.Config
	gate  gate.Config
	api   server.Config
	watch watch.Config
	// persisterGroup is the persister's consumer group: restores after a
	// Redis loss wait for its committed offsets.
	persisterGroup string
}

func newConfig() *config {
	c := &config{
		svc: cli.Service{
			Name: "kafkagate",
			About: "Serves the receipts API (gRPC, gRPC-Web, Connect, HTTP/JSON) on one port: marks are\n" +
				"max-merged into Redis and produced to Kafka with acks=all before the answer, or\n" +
				"spooled to a local fsynced spool when Kafka does not ack in time.",
			Admin: admin.Config{Addr: AdminAddrDefault},
			// Postgres only serves the read fallback: the gate accepts marks
			// while it waits. A migration that fails for good stops it.
			MigrateInBackground: true,
		},
		prod: producer.Config{
			Kafka:    kafkaconf.Config{ClientID: ClientIDDefault},
			Topic:    event.TopicDefault,
			SpoolDir: SpoolDirDefault,
		},
	}
	c.svc.Redis = &c.redis
	return c
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	c.prod.Kafka.RegisterFlags(fs)
	c.prod.RegisterFlags(fs)
	c.gate.RegisterFlags(fs)
	c.gate.ReadBy.RegisterFlags(fs)
	c.api.RegisterFlags(fs)
	c.watch.RegisterFlags(fs)
	if c.persisterGroup == "" {
		c.persisterGroup = persister.GroupDefault
	}
	fs.StringVar(&c.persisterGroup, "persister-group", c.persisterGroup, "the persister's consumer group: after Redis lost data, restores from Postgres wait until it has written what was in flight")
}

// run parses args and runs until ctx ends (main's signal context).
func run(ctx context.Context, args []string, stderr io.Writer) error {
	c := newConfig()
	b, done, err := c.svc.Boot(ctx, args, stderr, c.registerFlags)
	if done {
		return err
	}
	defer b.Close()

	c.prod.MaxRecordBytes, c.prod.MetricsSubsystem = gate.MaxRecordBytes, gate.MetricsSubsystem
	c.prod.Logger, c.prod.Registerer = b.Log, b.Registry
	prod, err := producer.New(c.prod)
	if err != nil {
		return err
	}
	// Closed after the runner stopped the API (drained) and the replayer.
	defer prod.Close()

	// The watch streams' reader: one per replica, for every local stream.
	// It reads on a client of its own: its XREADs block, and the gate
	// bounds every command of its client (redisstore.Bound).
	hubRedis, err := b.NewRedisClient()
	if err != nil {
		return err
	}
	c.watch.Redis, c.watch.Logger, c.watch.Registerer = hubRedis, b.Log, b.Registry
	c.watch.Keys = readby.NewStore(nil, redisstore.New(b.Redis, c.redis.StoreConfig()))
	hub, err := watch.New(c.watch)
	if err != nil {
		return err
	}
	c.gate.Watch = hub

	// Restores after a Redis loss wait until the persister has written
	// what was in flight (pkg/gate/restore.go).
	c.gate.Restore.Barrier = grouplag.NewBarrier(grouplag.BarrierConfig{
		Admin: prod.Admin(), Group: c.persisterGroup, Topic: c.prod.Topic, Pending: prod.Unsent,
	})
	c.gate.Producer, c.gate.Redis, c.gate.RedisPrefix, c.gate.Postgres = prod, b.Redis, c.redis.Prefix, b.Postgres
	c.gate.Logger, c.gate.Registerer = b.Log, b.Registry
	g, err := gate.New(c.gate)
	if err != nil {
		return err
	}
	c.api.Logger, c.api.Registerer, c.api.Tracing = b.Log, b.Registry, b.Tracing
	api, err := server.New(c.api, g)
	if err != nil {
		return err
	}
	// The API keeps serving for --shutdown-delay before its drain: the
	// ordered stop's bound grows by as much.
	c.svc.StopTimeout = lifecycle.StopTimeoutDefault + c.api.ShutdownDelay
	r := c.svc.Runner(b)
	// The detail threshold must be the persister's (stored once in Postgres).
	r.Wait("detail threshold", g.AgreeSettings)
	r.Add("producer", prod)
	// Stopped after the API, whose shutdown ends the watch streams first.
	r.Add("watch", hub)
	r.Add("api", api)
	return r.Run(ctx)
}
