package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/internal/bench/loadgen"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
)

// PersisterGroupDefault is the persister's consumer group.
const PersisterGroupDefault = "receipts-persister"

func runLoad(ctx context.Context, args []string) error {
	fs := newFlagSet("load", "load [flags]")
	var cfg loadgen.Config
	fs.StringVar(&cfg.Target, "target", loadgen.TargetDefault, "kafkagate base URL")
	fs.Float64Var(&cfg.Rate, "rate", 0, "offered load in events/s (0 = as fast as possible)")
	fs.DurationVar(&cfg.Duration, "duration", loadgen.DurationDefault, "how long to send (0 = until --events)")
	fs.Int64Var(&cfg.Events, "events", 0, "stop after this many events (0 = no cap)")
	fs.IntVar(&cfg.Users, "users", loadgen.UsersDefault, "number of users")
	fs.IntVar(&cfg.Channels, "channels", loadgen.ChannelsDefault, "number of channels")
	fs.StringVar(&cfg.UserPrefix, "user-prefix", loadgen.UserPrefixDefault, "prefix of generated user ids")
	fs.StringVar(&cfg.ChannelPrefix, "channel-prefix", loadgen.ChannelPrefixDefault, "prefix of generated channel ids")
	fs.Float64Var(&cfg.Zipf, "zipf", 0, "skew s > 1 of user and channel popularity (0 = uniform)")
	fs.Float64Var(&cfg.Dup, "dup", 0, "share of events that resend an earlier event")
	fs.Float64Var(&cfg.Reorder, "reorder", 0, "share of events with a seq below the last one sent for the key")
	readShare := fs.Float64("read-share", 0.8, "share of READ marks (the rest are DELIVERED)")
	fs.IntVar(&cfg.Batch, "batch", loadgen.BatchDefault, "events per request")
	fs.BoolVar(&cfg.Single, "single", false, "send each event alone on its single-mark route (POST /v1/users/{user}/channels/{channel}/read|delivered); implies --batch 1")
	fs.IntVar(&cfg.Concurrency, "concurrency", loadgen.ConcurrencyDefault, "requests in flight")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed (same seed, same event stream)")
	fs.BoolVar(&cfg.Gzip, "gzip", false, "ask for gzip-compressed responses (costs gateway CPU; off by default)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", loadgen.RequestTimeoutDefault, "timeout of one request")
	pgURL := fs.String("pg-url", "", "Postgres URL; when set, measure end-to-end lag (ack -> row in Postgres) on sampled events")
	lagEvery := fs.Int("lag-sample-every", loadgen.SampleEveryDefault, "sample one acked event in this many for the e2e lag")
	lagPending := fs.Int("lag-max-pending", loadgen.MaxPendingDefault, "lag samples polled at once (bounds the extra load on Postgres)")
	lagTimeout := fs.Duration("lag-timeout", loadgen.LagTimeoutDefault, "give up on a lag sample this long after its ack")
	waitLag := fs.Bool("wait-lag", false, "after the load, wait until the persister group's consumer lag is 0")
	waitLagTimeout := fs.Duration("wait-lag-timeout", 2*time.Minute, "how long --wait-lag waits")
	kafka := kafkaconf.Config{ClientID: "receiptsctl"}
	kafka.RegisterFlags(fs)
	group := fs.String("group", PersisterGroupDefault, "persister consumer group (for --wait-lag)")
	topic := fs.String("topic", event.TopicDefault, "receipts topic (for --wait-lag)")
	asJSON := fs.Bool("json", false, "print the summary as JSON on stdout (the text summary goes to stderr)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	strict := fs.Bool("strict", false, "exit 3 when any request failed, no event was acked, a lag sample timed out or --wait-lag timed out")
	cpuProfile := fs.String("cpuprofile", "", "write the tool's own CPU profile to this file (where the load generator's share of a co-located run goes)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.Single {
		cfg.Batch = 1
	}
	if *readShare < 0 || *readShare > 1 {
		return fmt.Errorf("--read-share must be within [0, 1], got %v", *readShare)
	}
	cfg.DeliveredShare = 1 - *readShare

	text := io.Writer(os.Stdout)
	if *asJSON {
		text = os.Stderr
	}
	if !*quiet {
		cfg.Progress = func(p loadgen.Progress) { fmt.Fprintln(os.Stderr, p) }
	}
	if *pgURL != "" {
		pg, err := pgstore.Open(ctx, pgstore.Config{URL: *pgURL, MaxConns: 8})
		if err != nil {
			return err
		}
		defer pg.Close()
		if err := pg.Ping(ctx); err != nil {
			return fmt.Errorf("pinging postgres for the lag measurement: %w", err)
		}
		cfg.Lag = &loadgen.LagConfig{Get: cursors.NewPostgres(pg).Get, SampleEvery: *lagEvery, MaxPending: *lagPending, Timeout: *lagTimeout}
	}

	// Connect to Kafka before the load, so a wrong --brokers fails fast.
	var adm *kadm.Client
	if *waitLag {
		cl, err := kgo.NewClient(kafka.Opts(nil, nil, "")...)
		if err != nil {
			return fmt.Errorf("creating kafka client: %w", err)
		}
		defer cl.Close()
		adm = kadm.NewClient(cl)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = grouplag.ConsumerLag(pctx, adm, *group, *topic)
		cancel()
		if err != nil {
			return fmt.Errorf("reading consumer lag before the load (is the broker up at %v?): %w", kafka.Brokers, err)
		}
	}

	d := cfg.WithDefaults()
	fmt.Fprintf(os.Stderr, "load: %s%s  rate %s  duration %s  events %s  users %d  channels %d  zipf %g  dup %g  reorder %g  read-share %g  batch %d  concurrency %d  seed %d\n",
		d.Target, d.Path, orUnlimited(d.Rate), d.Duration, orNone(d.Events), d.Users, d.Channels, d.Zipf, d.Dup, d.Reorder, *readShare, d.Batch, d.Concurrency, d.Seed)
	res, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprint(text, res.Summary())

	var lag *grouplag.TopicLag
	var waited time.Duration
	waitFailed := false
	if adm != nil && ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, *waitLagTimeout)
		start := time.Now()
		lastPrint := time.Time{}
		l, err := grouplag.WaitLagZero(wctx, adm, *group, *topic, 100*time.Millisecond, func(l grouplag.TopicLag) {
			if !*quiet && l.Total > 0 && time.Since(lastPrint) >= time.Second {
				lastPrint = time.Now()
				fmt.Fprintf(os.Stderr, "waiting for group %s: lag %d\n", *group, l.Total)
			}
		})
		cancel()
		waited = time.Since(start)
		lag = &l
		if err != nil {
			waitFailed = true
			fmt.Fprintf(text, "consumer lag: %v\n", err)
		} else {
			fmt.Fprintf(text, "consumer lag: 0 (group %s on %s, %d partitions) after waiting %s\n",
				*group, *topic, len(l.Partitions), waited.Round(time.Millisecond))
		}
	}

	if *asJSON {
		doc := map[string]any{}
		raw, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return err
		}
		doc["config"] = map[string]any{
			"target": d.Target, "rate": d.Rate, "duration_s": d.Duration.Seconds(), "events": d.Events,
			"users": d.Users, "channels": d.Channels, "zipf": d.Zipf, "dup": d.Dup, "reorder": d.Reorder,
			"read_share": *readShare, "batch": d.Batch, "concurrency": d.Concurrency, "seed": d.Seed,
		}
		if lag != nil {
			doc["consumer_lag"] = map[string]any{"group": *group, "topic": *topic, "total": lag.Total,
				"waited_s": waited.Seconds(), "reached_zero": !waitFailed}
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
	}

	if ctx.Err() != nil {
		return &exitError{code: 130, msg: "interrupted"}
	}
	if *strict {
		var problems []string
		if res.AckedEvents == 0 {
			problems = append(problems, "no event acknowledged")
		}
		if n := res.ErrorCount(); n > 0 {
			problems = append(problems, fmt.Sprintf("%d failed requests", n))
		}
		if res.Lag != nil && res.Lag.TimedOut > 0 {
			problems = append(problems, fmt.Sprintf("%d lag samples never reached Postgres", res.Lag.TimedOut))
		}
		if waitFailed {
			problems = append(problems, "consumer lag did not reach 0")
		}
		if len(problems) > 0 {
			return &exitError{code: 3, msg: fmt.Sprintf("strict: %v", problems)}
		}
	}
	return nil
}

func orUnlimited(rate float64) string {
	if rate == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%g/s", rate)
}

func orNone(n int64) string {
	if n == 0 {
		return "no cap"
	}
	return fmt.Sprint(n)
}

func runLag(ctx context.Context, args []string) error {
	fs := newFlagSet("lag", "lag [--brokers B] [--group G] [--topic T] [flags]")
	kafka := kafkaconf.Config{ClientID: "receiptsctl"}
	kafka.RegisterFlags(fs)
	group := fs.String("group", PersisterGroupDefault, "consumer group")
	topic := fs.String("topic", event.TopicDefault, "topic")
	asJSON := fs.Bool("json", false, "print JSON")
	wait := fs.Duration("wait-zero", 0, "wait up to this long for the lag to reach 0 (exit 3 if it does not)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kafka.Opts(nil, nil, "")...)
	if err != nil {
		return fmt.Errorf("creating kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	var l grouplag.TopicLag
	if *wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, *wait)
		l, err = grouplag.WaitLagZero(wctx, adm, *group, *topic, 200*time.Millisecond, nil)
		cancel()
		if err != nil && l.Partitions == nil {
			return err
		}
	} else {
		qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		l, err = grouplag.ConsumerLag(qctx, adm, *group, *topic)
		cancel()
		if err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(l); jerr != nil {
			return jerr
		}
	} else {
		fmt.Print(l)
	}
	if err != nil {
		return &exitError{code: 3, msg: err.Error()}
	}
	return nil
}
