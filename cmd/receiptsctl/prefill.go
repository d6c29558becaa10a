package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/internal/bench/loadgen"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// runPrefill writes many users' state into Redis before a load run
// (`receiptsctl load prefill`), so the gateway can be measured against a
// large Redis.
func runPrefill(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("load prefill", "load prefill --users N [flags]")
	cfg := loadgen.PrefillConfig{}
	fs.IntVar(&cfg.Users, "users", 10000, "users given state")
	fs.IntVar(&cfg.Channels, "channels", 1, "channels per user (states = users x channels)")
	fs.StringVar(&cfg.UserPrefix, "user-prefix", "prefill-u", "prefix of the users' ids (keep it apart from the load's users)")
	fs.IntVar(&cfg.Batch, "batch", loadgen.PrefillBatchDefault, "states per Redis pipeline")
	fs.IntVar(&cfg.Workers, "workers", loadgen.PrefillWorkersDefault, "pipelines in flight")
	quiet := fs.Bool("quiet", false, "no progress lines")
	pgURL := fs.String("pg-url", "", "Postgres URL; when set, the same states are also merged into Postgres, so that Redis and Postgres agree (the drift sweep then has nothing to repair)")
	var redisConf redisstore.ClientConfig
	redisConf.RegisterFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	rdb, err := redisConf.NewClient()
	if err != nil {
		return err
	}
	defer rdb.Close()
	store := redisstore.New(rdb, redisConf.StoreConfig())
	if err := store.Load(ctx); err != nil {
		return err
	}
	if *pgURL != "" {
		pg, err := pgstore.Open(ctx, pgstore.Config{URL: *pgURL, MaxConns: int32(max(cfg.Workers, 1))})
		if err != nil {
			return err
		}
		defer pg.Close()
		// The prefix's keys are new: COPY them without asking Postgres
		// (a join over a large table); a rerun's conflict falls back to
		// the merge.
		fresh := func(receipt.Key) bool { return false }
		cfg.Also = func(ctx context.Context, states []receipt.State) error {
			_, _, err := cursors.NewPostgres(pg).UpsertBulkGuessed(ctx, states, fresh)
			return err
		}
	}
	if !*quiet {
		cfg.Progress = func(n int64) { fmt.Fprintf(out, "prefill: %d states written\n", n) }
	}
	res, err := loadgen.Prefill(ctx, store, cfg)
	if err != nil {
		return err
	}
	mem, _ := rdb.InfoMap(ctx, "memory").Result()
	fmt.Fprintf(out, "prefill: %d states (%d users x %d channels) in %s, %.0f states/s; redis used_memory %s\n",
		res.States, cfg.Users, cfg.Channels, res.Elapsed.Round(time.Millisecond),
		float64(res.States)/res.Elapsed.Seconds(), mem["Memory"]["used_memory_human"])
	return nil
}
