package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/internal/bench/loadgen"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/views/readby"
)

// loggedTotalMetric is the persister's counter of cursor-move log rows.
const loggedTotalMetric = "receipts_persister_cursor_moves_logged_total"

// runReadByBench measures GET …/receipts and …/ticks of a small channel
// beside GET …/unread and a Redis PING, interleaved (BENCHMARKS.md,
// read-by and ticks).
func runReadByBench(ctx context.Context, args []string, out io.Writer) error {
	fs := commandFlags("readby-bench", "readby-bench [flags]")
	var c loadgen.ReadByConfig
	fs.StringVar(&c.Target, "target", loadgen.TargetDefault, "kafkagate base URL")
	fs.StringVar(&c.Channel, "channel", fmt.Sprintf("rb%d", time.Now().Unix()), "the channel (fresh by default; members <channel>-m<i>)")
	fs.IntVar(&c.Members, "members", 50, "members of the channel")
	fs.IntVar(&c.Messages, "messages", 200, "messages posted before measuring (member i has read up to messages*i/members)")
	fs.DurationVar(&c.Duration, "duration", 5*time.Second, "each operation's time per round")
	fs.IntVar(&c.Rounds, "rounds", 3, "rounds of (ping, unread, receipts, ticks)")
	fs.Float64Var(&c.ChannelRate, "channel-rate", 10, "messages/s posted in the channel while measuring, each read by a random member (0: none)")
	noPing := fs.Bool("no-ping", false, "do not measure a Redis PING")
	noSetup := fs.Bool("no-setup", false, "the channel is already set up")
	var redisConf redisstore.ClientConfig
	redisConf.RegisterFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	c.Client = &http.Client{Timeout: 30 * time.Second}
	if !*noPing {
		rdb, err := redisConf.NewClient()
		if err != nil {
			return err
		}
		defer rdb.Close()
		c.Ping = func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
	}
	if !*noSetup {
		start := time.Now()
		if err := loadgen.SetupReadBy(ctx, c); err != nil {
			return err
		}
		fmt.Fprintf(out, "set up %s: %d members, %d messages, in %s\n", c.Channel, c.Members, c.Messages, time.Since(start).Round(time.Millisecond))
	}
	res, err := loadgen.RunReadBy(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "read-by (%d members, %d rounds of %s per operation, 1 caller; in the channel meanwhile: %d messages read, %d failed):\n",
		c.Members, c.Rounds, c.Duration, res.ChannelMarks, res.ChannelErrors)
	var failed int64
	p50 := map[string]time.Duration{}
	for _, o := range res.Ops {
		fmt.Fprintln(out, " ", o)
		failed += o.Errors
		p50[o.Name] = o.Latency.P50
	}
	for _, base := range []string{"unread", "ping"} {
		if p50[base] > 0 {
			fmt.Fprintf(out, "  p50 ratios to %s: receipts %.2fx, ticks %.2fx\n", base,
				float64(p50["receipts"])/float64(p50[base]), float64(p50["ticks"])/float64(p50[base]))
		}
	}
	if failed > 0 {
		return fmt.Errorf("readby-bench: %d calls failed", failed)
	}
	return nil
}

// runMoveLogBench counts the cursor-move log rows the persister writes per
// mark in channels of several sizes.
func runMoveLogBench(ctx context.Context, args []string, out io.Writer) error {
	fs := commandFlags("movelog-bench", "movelog-bench [flags]")
	var c loadgen.MoveLogConfig
	fs.StringVar(&c.Target, "target", loadgen.TargetDefault, "kafkagate base URL")
	fs.StringVar(&c.Prefix, "prefix", fmt.Sprintf("ml%d-", time.Now().Unix()), "channel id prefix (channels <prefix>s<size>)")
	sizes := fs.String("sizes", "4,50,51,1000", "channel member counts, comma-separated")
	fs.IntVar(&c.Events, "events", 2000, "READ marks per channel, members in turn, each advancing")
	fs.Float64Var(&c.Rate, "rate", 500, "marks/s")
	fs.IntVar(&c.Batch, "batch", 20, "marks per MarkReceipts call")
	metricsURL := fs.String("metrics-url", "http://127.0.0.1:9101/metrics", "the persister's /metrics, to cross-check "+loggedTotalMetric+" (empty: skip; must see no other marks meanwhile)")
	pgConf := pgstore.Config{MaxConns: 2}
	pgConf.RegisterFlags(fs)
	kafka := kafkaconf.Config{ClientID: "receiptsbench"}
	kafka.RegisterFlags(fs)
	group := fs.String("group", persister.GroupDefault, "persister consumer group")
	topic := fs.String("topic", event.TopicDefault, "receipts topic")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	for _, s := range cli.SplitList(*sizes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("--sizes: %q is not a member count", s)
		}
		c.Sizes = append(c.Sizes, n)
	}
	pg, err := pgstore.Open(ctx, pgConf)
	if err != nil {
		return err
	}
	defer pg.Close()
	cl, err := kgo.NewClient(kafka.Opts(nil, nil, "")...)
	if err != nil {
		return fmt.Errorf("creating kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	c.Client = &http.Client{Timeout: 30 * time.Second}
	c.WaitQuiet = func(ctx context.Context) error {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if _, err := grouplag.WaitLagZero(wctx, adm, *group, *topic, 100*time.Millisecond, nil); err != nil {
			return fmt.Errorf("waiting for the persister: %w", err)
		}
		// The log rows of a window are written before its offsets commit;
		// a short pause covers a window still between the two.
		time.Sleep(500 * time.Millisecond)
		return nil
	}
	c.LogRows = readby.NewStore(pg, nil).MoveLogRows
	if *metricsURL != "" {
		c.LoggedTotal = func(ctx context.Context) (float64, error) {
			return scrapeCounter(ctx, c.Client, *metricsURL, loggedTotalMetric)
		}
	}
	c.Progress = func(s string) { fmt.Fprintln(os.Stderr, s) }
	rows, err := loadgen.RunMoveLog(ctx, c)
	fmt.Fprintf(out, "cursor-move log rows per mark (%d READ marks per channel at %.0f/s, batches of %d):\n", c.Events, c.Rate, c.Batch)
	for _, r := range rows {
		fmt.Fprintln(out, " ", r)
	}
	return err
}

// scrapeCounter reads one unlabelled sample from a Prometheus text page.
func scrapeCounter(ctx context.Context, cl *http.Client, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("scraping %s: %w", url, err)
	}
	return 0, fmt.Errorf("scraping %s: no sample %s", url, name)
}
