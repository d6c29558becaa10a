package main

// The dead-letter and drift commands:
//
//	receiptsctl dlt list   [--limit N] [--all] [--after ID] [--full]
//	receiptsctl dlt replay (--id N | --all) [--mode auto|repair|produce]
//	receiptsctl sweep      (also: receiptsctl dlt sweep)
//
// All identifiers here start with "dlt" so this file never collides with
// the rest of package main.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/cmd/receiptsctl/internal/replay"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/parked"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

const (
	dltListLimitDefault = 50
	// dltReasonWidth truncates reasons in the table unless --full.
	dltReasonWidth = 72
)

const dltUsage = `Usage:
  receiptsctl dlt list   [--limit N] [--all] [--after ID] [--full]   list parked dead letters
  receiptsctl dlt replay (--id N | --all) [--mode auto|repair|produce] replay parked dead letters
  receiptsctl sweep      [flags]                                        run one drift sweep and print the report

Run "receiptsctl dlt <command> -h" for a command's flags.
`

// runDLT runs "dlt <list|replay|sweep> ..." and "sweep ...". args may start
// with the command word ("dlt" or "sweep") or directly with the
// subcommand.
func runDLT(ctx context.Context, args []string) error {
	return dltRun(ctx, args, os.Stdout, os.Stderr)
}

func dltRun(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) > 0 && args[0] == "dlt" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprint(errOut, dltUsage)
		return errors.New("dlt: no subcommand given (list, replay or sweep)")
	}
	switch args[0] {
	case "list":
		return dltList(ctx, args[1:], out, errOut)
	case "replay":
		return dltReplay(ctx, args[1:], out, errOut)
	case "sweep":
		return dltSweep(ctx, args[1:], out, errOut)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(out, dltUsage)
		return nil
	}
	fmt.Fprint(errOut, dltUsage)
	return fmt.Errorf("dlt: unknown subcommand %q", args[0])
}

// dltStores are the flags and clients shared by the commands.
type dltStores struct {
	pgConf    pgstore.Config
	redisConf redisstore.ClientConfig
	pg        *pgstore.Store
	rdb       redis.UniversalClient
	rs        *redisstore.Store
}

func (s *dltStores) pgFlags(fs *flag.FlagSet) {
	s.pgConf.MaxConns = 4
	s.pgConf.RegisterFlags(fs)
}

func (s *dltStores) redisFlags(fs *flag.FlagSet) { s.redisConf.RegisterFlags(fs) }

func (s *dltStores) openPG(ctx context.Context) error {
	pg, err := pgstore.Open(ctx, s.pgConf)
	if err != nil {
		return err
	}
	s.pg = pg
	return nil
}

func (s *dltStores) openRedis() error {
	rdb, err := s.redisConf.NewClient()
	if err != nil {
		return err
	}
	s.rdb = rdb
	s.rs = redisstore.New(s.rdb, s.redisConf.StoreConfig())
	return nil
}

func (s *dltStores) close() {
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.pg != nil {
		s.pg.Close()
	}
}

func dltList(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("dlt list", "dlt list [--limit N] [--all] [--after ID] [--full] [flags]")
	fs.SetOutput(errOut)
	var st dltStores
	st.pgFlags(fs)
	limit := fs.Int("limit", dltListLimitDefault, "list at most N records")
	all := fs.Bool("all", false, "also list records already replayed")
	after := fs.Int64("after", 0, "list records with an id greater than this (paging)")
	full := fs.Bool("full", false, "print whole reasons instead of truncating them")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *limit <= 0 {
		return fmt.Errorf("--limit must be > 0, got %d", *limit)
	}
	if err := st.openPG(ctx); err != nil {
		return err
	}
	defer st.close()

	recs, err := parked.New(st.pg).List(ctx, parked.Query{AfterID: *after, Limit: *limit, IncludeReplayed: *all})
	if err != nil {
		return err
	}
	pending, err := parked.New(st.pg).Count(ctx)
	if err != nil {
		return err
	}
	dltPrintTable(out, recs, *all, *full)
	fmt.Fprintf(out, "\n%d listed; %d pending in total", len(recs), pending)
	if len(recs) == *limit {
		fmt.Fprintf(out, "; more may follow: --after %d", recs[len(recs)-1].ID)
	}
	fmt.Fprintln(out)
	return nil
}

func dltPrintTable(out io.Writer, recs []parked.Record, withReplayed, full bool) {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	header := "ID\tPARKED AT\tATTEMPTS\tSOURCE\tKEY\tREASON"
	if withReplayed {
		header = "ID\tPARKED AT\tREPLAYED AT\tATTEMPTS\tSOURCE\tKEY\tREASON"
	}
	fmt.Fprintln(tw, header)
	for _, r := range recs {
		reason := r.Reason
		if !full && len(reason) > dltReasonWidth {
			reason = reason[:dltReasonWidth-3] + "..."
		}
		reason = strings.Map(func(c rune) rune {
			if c == '\t' || c == '\n' || c == '\r' {
				return ' '
			}
			return c
		}, reason)
		fmt.Fprintf(tw, "%d\t%s\t", r.ID, r.ParkedAt.UTC().Format(time.RFC3339))
		if withReplayed {
			replayed := "-"
			if r.ReplayedAt != nil {
				replayed = r.ReplayedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t", replayed)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Attempts, dltSource(r), dltKey(r.Key), reason)
	}
	_ = tw.Flush()
}

// dltSource shows where a record came from: topic/partition@offset.
func dltSource(r parked.Record) string {
	if r.SourceTopic == "" && r.SourcePartition < 0 && r.SourceOffset < 0 {
		return "-"
	}
	topic := r.SourceTopic
	if topic == "" {
		topic = "?"
	}
	return fmt.Sprintf("%s/%d@%d", topic, r.SourcePartition, r.SourceOffset)
}

// dltKey prints a key as is when it is plain text, quoted otherwise.
func dltKey(k []byte) string {
	if k == nil {
		return "-"
	}
	s := string(k)
	for _, c := range s {
		if c == unicode.ReplacementChar || !unicode.IsPrint(c) || unicode.IsSpace(c) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

func dltReplay(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("dlt replay", "dlt replay (--id N | --all) [--mode auto|repair|produce] [flags]")
	fs.SetOutput(errOut)
	var st dltStores
	st.pgFlags(fs)
	st.redisFlags(fs)
	id := fs.Int64("id", 0, "replay the parked record with this id")
	all := fs.Bool("all", false, "replay every pending parked record")
	mode := fs.String("mode", string(replay.Auto),
		"auto: repair decodable records directly, re-produce the others to --topic; repair: only repair; produce: re-produce all to --topic")
	kafka := kafkaconf.Config{ClientID: "receiptsctl"}
	kafka.RegisterFlags(fs)
	topic := fs.String("topic", event.TopicDefault, "main topic to re-produce to")
	noRedis := fs.Bool("no-redis", false, "repair Postgres only (the drift sweep brings Redis along later)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if (*id > 0) == *all {
		return errors.New("give exactly one of --id N or --all")
	}
	if err := st.openPG(ctx); err != nil {
		return err
	}
	defer st.close()
	cfg := replay.Config{Postgres: st.pg, Topic: *topic, Mode: replay.Mode(*mode)}
	if !*noRedis {
		if err := st.openRedis(); err != nil {
			return err
		}
		cfg.Redis = st.rs
	}
	if cfg.Mode != replay.Repair {
		// A bounded delivery timeout: kgo's idempotent producer otherwise
		// retries forever while the broker is down.
		opts := append(kafka.Opts(nil, nil, ""),
			kgo.RecordDeliveryTimeout(30*time.Second))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return fmt.Errorf("creating kafka client: %w", err)
		}
		defer cl.Close()
		cfg.Producer = cl
	}
	rp, err := replay.NewReplayer(cfg)
	if err != nil {
		return err
	}

	if !*all {
		outcome, err := rp.ReplayID(ctx, *id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%d\t%s\n", *id, outcome)
		return nil
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKEY\tOUTCOME")
	replayed, failed, err := rp.ReplayAll(ctx, func(r parked.Record, o replay.Outcome, err error) {
		res := string(o)
		if err != nil {
			res = "failed: " + err.Error()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", r.ID, dltKey(r.Key), res)
	})
	_ = tw.Flush()
	fmt.Fprintf(out, "\n%d replayed, %d failed (still parked)\n", replayed, failed)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d parked record(s) could not be replayed", failed)
	}
	return nil
}

func dltSweep(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("sweep", "sweep [flags]")
	fs.SetOutput(errOut)
	var st dltStores
	st.pgFlags(fs)
	st.redisFlags(fs)
	var sc drift.Config
	sc.RegisterFlagsWithPrefix("", fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := st.openPG(ctx); err != nil {
		return err
	}
	defer st.close()
	if err := st.openRedis(); err != nil {
		return err
	}
	sc.Postgres, sc.Redis = st.pg, st.rs
	sw, err := drift.New(sc)
	if err != nil {
		return err
	}
	rep, err := sw.SweepOnce(ctx)
	dltPrintReport(out, rep)
	if err != nil {
		return fmt.Errorf("sweep stopped early: %w", err)
	}
	return nil
}

func dltPrintReport(out io.Writer, r drift.Report) {
	fmt.Fprintf(out, "sweep took %s: %d Postgres rows, %d Redis users (%d fields), %d pages\n",
		r.Duration.Round(time.Millisecond), r.PostgresRows, r.RedisUsers, r.RedisFields, r.Pages)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIRECTION\tFOUND\tREPAIRED\t")
	for _, row := range []struct {
		name         string
		found, fixed int
	}{
		{drift.DirRedisAhead + " (→ postgres)", r.Found.RedisAhead, r.Repaired.RedisAhead},
		{drift.DirPostgresAhead + " (→ redis)", r.Found.PostgresAhead, r.Repaired.PostgresAhead},
		{drift.DirRedisMissing + " (→ redis)", r.Found.RedisMissing, r.Repaired.RedisMissing},
		{drift.DirPostgresMissing + " (→ postgres)", r.Found.PostgresMissing, r.Repaired.PostgresMissing},
		{"total", r.Found.Total(), r.Repaired.Total()},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", row.name, row.found, row.fixed)
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "in flight (left alone): %d, invalid Redis fields: %d, failed repairs: %d\n", r.InFlight, r.Invalid, r.Failed)
	for _, smp := range r.Samples {
		fmt.Fprintf(out, "found %s %s %s: postgres %s, redis %s\n", smp.Kind, smp.Direction, smp.Key, smp.Postgres, smp.Redis)
	}
}
