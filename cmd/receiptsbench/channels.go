package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/internal/bench/loadgen"
)

// runNotices posts message notices through the gateway in a closed loop
// and prints notices/s and the call latency (BENCHMARKS.md, channels and
// counts).
func runNotices(ctx context.Context, args []string, out io.Writer) error {
	fs := commandFlags("notices", "notices [flags]")
	var c loadgen.NoticeConfig
	fs.StringVar(&c.Target, "target", loadgen.TargetDefault, "kafkagate base URL")
	fs.DurationVar(&c.Duration, "duration", 20*time.Second, "how long to run")
	fs.IntVar(&c.Concurrency, "concurrency", 8, "callers, each with one call in flight")
	fs.IntVar(&c.Batch, "batch", 50, "notices per NotifyMessages call (<= 500)")
	fs.IntVar(&c.Channels, "channels", 1000, "channels")
	fs.IntVar(&c.Users, "users", 10000, "users (senders and mentioned)")
	fs.IntVar(&c.Mentions, "mentions", 1, "mentioned users per notice")
	fs.StringVar(&c.Prefix, "prefix", fmt.Sprintf("n%d-", time.Now().Unix()), "id prefix of channels and users")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	c.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: c.Concurrency}}
	res, err := loadgen.RunNotices(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "notices:", res)
	if res.Errors > 0 {
		return fmt.Errorf("notices: %d calls failed", res.Errors)
	}
	return nil
}

// runUnreadBench measures a user's GET …/unread latency with the user in
// --channels channels (set up first unless --no-setup).
func runUnreadBench(ctx context.Context, args []string, out io.Writer) error {
	fs := commandFlags("unread-bench", "unread-bench [flags]")
	var c loadgen.UnreadConfig
	fs.StringVar(&c.Target, "target", loadgen.TargetDefault, "kafkagate base URL")
	fs.StringVar(&c.User, "user", fmt.Sprintf("ub%d", time.Now().Unix()), "the user to read (fresh by default)")
	fs.IntVar(&c.Channels, "channels", 100, "channels the user is a member of, each with 10 messages and 2 mentions")
	fs.DurationVar(&c.Duration, "duration", 20*time.Second, "how long to read")
	fs.IntVar(&c.Concurrency, "concurrency", 1, "readers, each with one call in flight")
	fs.IntVar(&c.PageSize, "page-size", 0, "page_size of each call (0: the server's default, 1,000)")
	fs.BoolVar(&c.AllPages, "all-pages", false, "each call walks every page of the default set (items are pages)")
	fs.BoolVar(&c.Inbox, "inbox", false, "read the user's inbox (GET …/inbox, its first page) in place of GetUnread")
	fs.IntVar(&c.InboxLimit, "inbox-limit", 50, "lines of the inbox page")
	fs.IntVar(&c.Deletions, "deletions", 0, "messages of each channel the setup deletes (from its second on)")
	noSetup := fs.Bool("no-setup", false, "the user is already set up")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	c.Client = &http.Client{Timeout: 30 * time.Second}
	if !*noSetup {
		start := time.Now()
		if err := loadgen.SetupUnread(ctx, c); err != nil {
			return err
		}
		fmt.Fprintf(out, "set up %s in %d channels in %s\n", c.User, c.Channels, time.Since(start).Round(time.Millisecond))
	}
	res, err := loadgen.RunUnread(ctx, c)
	if err != nil {
		return err
	}
	what := "unread"
	if c.Inbox {
		what = fmt.Sprintf("inbox of %d lines", c.InboxLimit)
	}
	fmt.Fprintf(out, "%s (%d channels): %s\n", what, c.Channels, res)
	if res.Errors > 0 {
		return fmt.Errorf("unread-bench: %d calls failed", res.Errors)
	}
	return nil
}

// runThreadBench measures a user's GET …/threads latency with the user
// following --threads threads (set up first unless --no-setup).
func runThreadBench(ctx context.Context, args []string, out io.Writer) error {
	fs := commandFlags("thread-bench", "thread-bench [flags]")
	var c loadgen.ThreadConfig
	fs.StringVar(&c.Target, "target", loadgen.TargetDefault, "kafkagate base URL")
	fs.StringVar(&c.User, "user", fmt.Sprintf("tb%d", time.Now().Unix()), "the user to read (fresh by default)")
	fs.IntVar(&c.Threads, "threads", 100, "threads the user follows, each with 2 unread replies and 1 mention")
	fs.IntVar(&c.PerChannel, "per-channel", 100, "thread roots per channel")
	fs.IntVar(&c.SetupConcurrency, "setup-concurrency", 8, "calls in flight while setting up")
	fs.DurationVar(&c.Duration, "duration", 20*time.Second, "how long to read")
	fs.IntVar(&c.Concurrency, "concurrency", 1, "readers, each with one call in flight")
	fs.IntVar(&c.Limit, "limit", 1000, "limit of each call (the server's maximum is 1,000)")
	noSetup := fs.Bool("no-setup", false, "the user is already set up")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	c.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: max(c.Concurrency, c.SetupConcurrency)}}
	if !*noSetup {
		start := time.Now()
		if err := loadgen.SetupThreads(ctx, c); err != nil {
			return err
		}
		fmt.Fprintf(out, "set up %s following %d threads in %s\n", c.User, c.Threads, time.Since(start).Round(time.Millisecond))
	}
	res, err := loadgen.RunThreads(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "threads (%d followed): %s\n", c.Threads, res)
	if res.Errors > 0 {
		return fmt.Errorf("thread-bench: %d calls failed", res.Errors)
	}
	return nil
}
