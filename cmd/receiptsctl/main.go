// Command receiptsctl is the operator CLI of the receipts system: load the
// gateway and measure it (load, the one capacity tool), read a consumer
// group's lag (lag), compare a user's state in Redis and Postgres
// (inspect), list or replay parked dead letters and run a drift sweep
// (dlt, sweep), create the topics (topics ensure), erase users through
// the gateway (erase) and send an orphaned spool directory to Kafka
// (spool replay). The benchmark harnesses are receiptsbench's.
//
// Every flag can also be set from the environment as RECEIPTS_<FLAG_NAME>
// (--pg-url ← RECEIPTS_PG_URL); a flag on the command line wins.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"text/tabwriter"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

const usage = `receiptsctl: operator CLI for the receipts pipeline

Usage:
  receiptsctl load    [flags]   drive kafkagate with marks; report rate, latency, e2e lag
  receiptsctl load prefill --users N [flags]   write N users' state into Redis (a large Redis for load runs)
  receiptsctl lag     [flags]   consumer lag per partition of a group on a topic
  receiptsctl inspect --user U [--channel C,...]   Redis vs Postgres state of a user
  receiptsctl dlt ... [flags]   list / replay parked dead letters
  receiptsctl sweep   [flags]   drift sweep between Redis and Postgres
  receiptsctl erase   --user U[,U2] [flags]  erase users through kafkagate (DELETE /v1/users/U)
  receiptsctl spool replay --dir D [flags]   send an orphaned spool directory to Kafka
  receiptsctl topics ensure [flags]   create the topics when missing; report how existing ones differ

Run "receiptsctl <command> -h" for a command's flags, "receiptsctl --version"
for the version. Every flag can also be set
as RECEIPTS_<FLAG_NAME> in the environment (--pg-url <- RECEIPTS_PG_URL).
The benchmark harnesses (http-floor, notices, unread-bench, readby-bench,
movelog-bench, persister) are receiptsbench's.
`

// exitError carries a specific exit status (e.g. a check that failed)
// without printing a usage message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := dispatch(ctx, os.Args[1:])
	stop()
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	fmt.Fprintln(os.Stderr, "receiptsctl:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	os.Exit(1)
}

func dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return &exitError{code: 2, msg: "no command given"}
	}
	if cli.IsVersionArg(args) {
		cli.PrintVersion(os.Stdout, "receiptsctl")
		return nil
	}
	switch args[0] {
	case "load":
		if len(args) > 1 && args[1] == "prefill" {
			return runPrefill(ctx, args[2:], os.Stdout)
		}
		return runLoad(ctx, args[1:])
	case "lag":
		return runLag(ctx, args[1:])
	case "inspect":
		return runInspect(ctx, args[1:], os.Stdout)
	case "topics":
		return runTopics(ctx, args[1:])
	case "erase":
		return runErase(ctx, args[1:], os.Stdout)
	case "spool":
		return runSpool(ctx, args[1:], os.Stdout)
	case "dlt", "sweep":
		// runDLT (dlt.go) receives the command word too, so it can tell
		// "dlt list", "dlt replay" and "sweep" apart.
		return runDLT(ctx, args)
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return nil
	case "http-floor", "notices", "unread-bench", "readby-bench", "movelog-bench":
		return &exitError{code: 2, msg: fmt.Sprintf("%s is a benchmark harness: run receiptsbench %s", args[0], args[0])}
	}
	fmt.Fprint(os.Stderr, usage)
	return &exitError{code: 2, msg: fmt.Sprintf("unknown command %q", args[0])}
}

// splitList splits a comma-separated flag value, dropping empty items.
var splitList = cli.SplitList

// newFlagSet returns a flag set whose -h prints the command's flags.
func newFlagSet(name, synopsis string) *flag.FlagSet {
	return cli.CommandFlags("receiptsctl", name, synopsis)
}

func runInspect(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("inspect", "inspect --user U [--channel C1,C2] [flags]")
	user := fs.String("user", "", "user id (required)")
	var channels []string
	fs.Func("channel", "channel ids, comma-separated (default: all of the user's channels)", func(v string) error {
		channels = splitList(v)
		return nil
	})
	pgConf := pgstore.Config{MaxConns: 2}
	pgConf.RegisterFlags(fs)
	var redisConf redisstore.ClientConfig
	redisConf.RegisterFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := receipt.ValidateID("--user", *user); err != nil {
		return err
	}
	for _, c := range channels {
		if err := receipt.ValidateID("--channel", c); err != nil {
			return err
		}
	}

	rdb, err := redisConf.NewClient()
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	rs := redisstore.New(rdb, redisConf.StoreConfig())
	pg, err := pgstore.Open(ctx, pgConf)
	if err != nil {
		return err
	}
	defer pg.Close()

	rStates, complete, rErr := cursors.NewStore(rs).Get(ctx, *user, channels)
	pStates, pErr := cursors.NewPostgres(pg).Get(ctx, *user, channels)
	rows := compareStates(rStates, pStates)

	if *asJSON {
		type side struct {
			Error    string `json:"error,omitempty"`
			Complete *bool  `json:"complete,omitempty"`
		}
		doc := struct {
			User     string       `json:"user"`
			Redis    side         `json:"redis"`
			Postgres side         `json:"postgres"`
			Channels []inspectRow `json:"channels"`
		}{User: *user, Channels: rows}
		if rErr != nil {
			doc.Redis.Error = rErr.Error()
		} else {
			doc.Redis.Complete = &complete
		}
		if pErr != nil {
			doc.Postgres.Error = pErr.Error()
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "user %s\n", *user)
		if rErr != nil {
			fmt.Fprintf(out, "  redis:    error: %v\n", rErr)
		} else {
			fmt.Fprintf(out, "  redis:    %d channel(s); hash complete (hydrated from Postgres): %v\n", len(rStates), complete)
		}
		if pErr != nil {
			fmt.Fprintf(out, "  postgres: error: %v\n", pErr)
		} else {
			fmt.Fprintf(out, "  postgres: %d channel(s)\n", len(pStates))
		}
		if len(rows) > 0 {
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\nCHANNEL\tREDIS READ\tREDIS DELIVERED\tPG READ\tPG DELIVERED\tDEVICE (REDIS/PG)\tVERDICT")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\n", r.Channel,
					cursorText(r.Redis, true), cursorText(r.Redis, false),
					cursorText(r.Postgres, true), cursorText(r.Postgres, false),
					deviceText(r.Redis), deviceText(r.Postgres), r.Verdict)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}
	if rErr != nil && pErr != nil {
		return fmt.Errorf("reading both stores: redis: %w; postgres: %w", rErr, pErr)
	}
	return nil
}

// inspectRow is one channel of a user, as each store holds it.
type inspectRow struct {
	Channel  string         `json:"channel"`
	Redis    *receipt.State `json:"redis,omitempty"`
	Postgres *receipt.State `json:"postgres,omitempty"`
	// Verdict is "same", "redis ahead", "postgres ahead", "redis only",
	// "postgres only" or "diverged" (each ahead on one cursor).
	Verdict string `json:"verdict"`
}

func compareStates(redisStates, pgStates []receipt.State) []inspectRow {
	byChannel := map[string]*inspectRow{}
	row := func(ch string) *inspectRow {
		if r, ok := byChannel[ch]; ok {
			return r
		}
		r := &inspectRow{Channel: ch}
		byChannel[ch] = r
		return r
	}
	for i := range redisStates {
		row(redisStates[i].Key.Channel).Redis = &redisStates[i]
	}
	for i := range pgStates {
		row(pgStates[i].Key.Channel).Postgres = &pgStates[i]
	}
	out := make([]inspectRow, 0, len(byChannel))
	for _, r := range byChannel {
		switch {
		case r.Postgres == nil:
			r.Verdict = "redis only"
		case r.Redis == nil:
			r.Verdict = "postgres only"
		case r.Redis.SameCursors(*r.Postgres):
			r.Verdict = "same"
		case r.Redis.Covers(*r.Postgres):
			r.Verdict = "redis ahead"
		case r.Postgres.Covers(*r.Redis):
			r.Verdict = "postgres ahead"
		default:
			r.Verdict = "diverged"
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b inspectRow) int {
		switch {
		case a.Channel < b.Channel:
			return -1
		case a.Channel > b.Channel:
			return 1
		}
		return 0
	})
	return out
}

// cursorText shows a cursor as seq (or epoch.seq once marked unread) with
// its message id, "-" when absent.
func cursorText(st *receipt.State, read bool) string {
	if st == nil {
		return "-"
	}
	c := st.Delivered
	if read {
		c = st.Read
	}
	if c.Position.IsZero() {
		return "0"
	}
	s := strconv.FormatInt(c.Position.Seq, 10)
	if c.Position.Epoch != 0 {
		s = "e" + strconv.FormatInt(c.Position.Epoch, 10) + "." + s
	}
	if c.MessageID != "" {
		s += " (" + c.MessageID + ")"
	}
	return s
}

func deviceText(st *receipt.State) string {
	if st == nil || st.DeviceID == "" {
		return "-"
	}
	return st.DeviceID
}
