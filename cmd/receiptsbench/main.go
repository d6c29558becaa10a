// Command receiptsbench runs the project's measurement harnesses; the
// operator CLI (receiptsctl) keeps the one capacity tool, load.
//
//	receiptsbench persister [flags]      the persister's cold-start drain of a
//	                                     generated backlog, beside same-run COPY
//	                                     and naive-upsert baselines
//	                                     (internal/bench/drainbench;
//	                                     `make bench-persister`)
//	receiptsbench http-floor [--addr A]  serve fixed mark answers: the HTTP
//	                                     floor a gateway is compared with
//	receiptsbench notices [flags]        post message notices in a closed loop;
//	                                     notices/s and latency
//	receiptsbench unread-bench [flags]   a user in N channels; GET …/unread latency
//	receiptsbench thread-bench [flags]   a user following N threads; GET …/threads
//	                                     latency
//	receiptsbench readby-bench [flags]   a small channel's receipts and ticks
//	                                     latency beside unread and a Redis PING
//	receiptsbench movelog-bench [flags]  cursor-move log rows per mark, for
//	                                     channels of several sizes
//
// Every flag can also be set from the environment (--runs from
// RECEIPTS_RUNS, and so on; the flag wins). A harness exits non-zero when a
// measurement failed (a failed call, a drained table that differed from
// the data set).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/readstate/receipts/cmd/internal/cli"
)

const usage = `receiptsbench: the receipts pipeline's measurement harnesses

Usage:
  receiptsbench persister [flags]       the persister's cold-start drain beside same-run COPY and naive-upsert baselines
  receiptsbench http-floor [--addr A]   serve fixed mark answers: the HTTP floor a gateway is compared with
  receiptsbench notices [flags]         post message notices in a closed loop; notices/s and latency
  receiptsbench unread-bench [flags]    a user in N channels; GET /v1/users/USER/unread latency
  receiptsbench thread-bench [flags]    a user following N threads; GET /v1/users/USER/threads latency
  receiptsbench readby-bench [flags]    a small channel's receipts and ticks latency beside unread and a Redis PING
  receiptsbench movelog-bench [flags]   cursor-move log rows per mark, for channels of several sizes

Run "receiptsbench <command> --help" for a command's flags, "receiptsbench --version"
for the version. Every flag can also be
set as RECEIPTS_<FLAG_NAME> in the environment (--pg-url <- RECEIPTS_PG_URL).
The load itself is driven by "receiptsctl load".
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "receiptsbench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a subcommand is required")
	}
	if cli.IsVersionArg(args) {
		cli.PrintVersion(stdout, "receiptsbench")
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "persister":
		return runPersister(ctx, args[1:], stdout, stderr)
	case "http-floor":
		err = runHTTPFloor(ctx, args[1:], stdout)
	case "notices":
		err = runNotices(ctx, args[1:], stdout)
	case "unread-bench":
		err = runUnreadBench(ctx, args[1:], stdout)
	case "thread-bench":
		err = runThreadBench(ctx, args[1:], stdout)
	case "readby-bench":
		err = runReadByBench(ctx, args[1:], stdout)
	case "movelog-bench":
		err = runMoveLogBench(ctx, args[1:], stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// commandFlags returns a flag set whose --help prints the command's flags.
func commandFlags(name, synopsis string) *flag.FlagSet {
	return cli.CommandFlags("receiptsbench", name, synopsis)
}
