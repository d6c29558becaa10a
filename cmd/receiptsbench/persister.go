package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/internal/bench/drainbench"
)

// runPersister is `receiptsbench persister`: the persister's cold-start
// drain beside same-run COPY and naive-upsert baselines (drainbench). It
// prints progress on stderr and the markdown summary on stdout, and fails
// when a measurement failed or a drained table differed from the data set.
func runPersister(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := drainbench.DefaultConfig()
	var report string
	fs := newFlagSet(&cfg, &report, stderr)
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if report != "" {
		res, err := drainbench.Rerender(report)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, drainbench.Markdown(res))
		return nil
	}
	cfg.CommandLine = "receiptsbench " + shellJoin(append([]string{"persister"}, args...))
	cfg.Log = stderr
	res, err := drainbench.Run(ctx, cfg)
	if res != nil {
		fmt.Fprint(stdout, drainbench.Markdown(res))
	}
	return err
}

func newFlagSet(cfg *drainbench.Config, report *string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("receiptsbench persister", flag.ContinueOnError)
	fs.SetOutput(out)
	d := &cfg.Data
	fs.Uint64Var(&d.Seed, "seed", d.Seed, "seed of the data set")
	fs.IntVar(&d.Events, "events", d.Events, "events in the data set")
	fs.IntVar(&d.Users, "users", d.Users, "users (zipf-skewed)")
	fs.IntVar(&d.Channels, "channels", d.Channels, "channels (zipf-skewed, independently of users)")
	fs.Float64Var(&d.Zipf, "zipf", d.Zipf, "zipf skew s of users and channels")
	fs.Float64Var(&d.Dup, "dup", d.Dup, "share of events that resend the key's latest mark")
	fs.Float64Var(&d.Late, "late", d.Late, "share of events that arrive late (a seq below the key's latest)")
	fs.IntVar(&d.Devices, "devices", d.Devices, "devices a user marks from")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topic")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "rounds; medians are reported")
	fs.Var(&repeated{list: &cfg.PersisterBins}, "persister-bin", "persister binary; repeat to compare builds, interleaved round by round (A, B, …)")
	fs.Var(&repeated{list: &cfg.PersisterArgs}, "persister-args", "extra persister arguments, split on spaces (e.g. '--writers 4'); repeat for more variants")
	fs.StringVar(&cfg.DevbrokerBin, "devbroker-bin", cfg.DevbrokerBin, "devbroker binary")
	fs.StringVar(&cfg.PGURL, "pg-url", cfg.PGURL, "Postgres server URL (its database is only used to create the bench's)")
	fs.StringVar(&cfg.PGDatabase, "pg-database", cfg.PGDatabase, "the bench's database, dropped and recreated (its name must contain \"bench\")")
	fs.StringVar(&cfg.Group, "group", cfg.Group, "the persister's consumer group (whose offsets are watched)")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", cfg.PollInterval, "how often Postgres is polled during a drain")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "bound of one drain")
	fs.BoolVar(&cfg.Copy, "copy", cfg.Copy, "measure the COPY baselines")
	fs.IntVar(&cfg.NaiveEvents, "naive-events", cfg.NaiveEvents, "events of the naive one-upsert-per-event baseline; 0 skips it")
	fs.IntVar(&cfg.PrefillRows, "prefill-rows", cfg.PrefillRows, "rows of other keys in read_receipts before each drain (the cost of a large table: compare --prefill-rows 100000 with 10000000)")
	fs.IntVar(&cfg.NaiveConns, "naive-conns", cfg.NaiveConns, "connections of the naive baseline")
	fs.IntVar(&cfg.PprofSeconds, "pprof-seconds", cfg.PprofSeconds, "if > 0, one more (unmeasured) drain of variant A with a CPU profile of this many seconds")
	fs.StringVar(&cfg.OutDir, "out-dir", cfg.OutDir, "directory receiving persister-<UTC time>/")
	fs.StringVar(report, "report", "", "measure nothing: re-render the summary of an earlier run's directory (its result.json) with this build's definitions")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: receiptsbench persister [flags]\n\n"+
			"Drains a generated backlog with the persister binary from a cold start and\n"+
			"measures it beside same-run COPY and naive-upsert baselines (BENCHMARKS.md).\n\nFlags:\n")
		cli.PrintDefaults(fs)
	}
	return fs
}

// repeated is a repeatable string flag whose first use replaces the
// default.
type repeated struct {
	list *[]string
	set  bool
}

func (r *repeated) String() string {
	if r == nil || r.list == nil {
		return ""
	}
	return strings.Join(*r.list, ", ")
}

func (r *repeated) Set(s string) error {
	if !r.set {
		*r.list, r.set = nil, true
	}
	*r.list = append(*r.list, s)
	return nil
}

// shellJoin quotes the arguments that a shell would split or expand.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$`\\*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
