package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Read-by and ticks: the latency of who-has-seen answers for one
// small channel, beside a plain unread answer and a Redis PING in the same
// run, and the cursor-move log rows the persister writes per mark for
// channels of several sizes. Figures in BENCHMARKS.md.

// ReadByConfig configures SetupReadBy and RunReadBy.
type ReadByConfig struct {
	Target string
	// Channel is the channel measured; its members are "<Channel>-m<i>",
	// member 0 the sender of every message.
	Channel string
	// Members is the channel's member count (the gateway's detail
	// threshold is 50 by default: at most that many answer member lists).
	Members int
	// Messages is the channel's head after the setup.
	Messages int
	// Duration is each operation's share of one round; Rounds rounds run
	// the operations in turn, so a load spike hits all of them alike.
	Duration time.Duration
	Rounds   int
	// ChannelRate is messages/s posted in the channel during the
	// measurement, each followed by one member reading it (a mark in the
	// measured channel, so the view and the log move under the reader).
	ChannelRate float64
	// Ping, when set, is measured too (a Redis PING: the floor of any
	// answer that needs a Redis round trip).
	Ping   func(context.Context) error
	Client *http.Client
}

func (c ReadByConfig) client() *http.Client {
	if c.Client == nil {
		return http.DefaultClient
	}
	return c.Client
}

func (c ReadByConfig) member(i int) string { return c.Channel + "-m" + strconv.Itoa(i) }

// ReadByOp is one measured operation's figures.
type ReadByOp struct {
	Name    string
	Calls   int64
	Errors  int64
	Elapsed time.Duration
	Latency Percentiles
	// FirstError is the first failure's message.
	FirstError string
}

func (o ReadByOp) String() string {
	rate := 0.0
	if o.Elapsed > 0 {
		rate = float64(o.Calls) / o.Elapsed.Seconds()
	}
	s := fmt.Sprintf("%-9s %s  (%.0f calls/s, %d errors)", o.Name, o.Latency, rate, o.Errors)
	if o.FirstError != "" {
		s += " first error: " + o.FirstError
	}
	return s
}

// ReadByResult is what RunReadBy measured.
type ReadByResult struct {
	Ops []ReadByOp
	// ChannelMarks are the marks made in the channel while measuring.
	ChannelMarks, ChannelErrors int64
}

// SetupReadBy joins Members members, posts Messages messages from member
// 0 and spreads the others' cursors: member i has received everything and
// read up to Messages*i/Members, so a message's read-by splits the members.
func SetupReadBy(ctx context.Context, cfg ReadByConfig) error {
	if cfg.Members < 2 || cfg.Messages < 1 || cfg.Channel == "" {
		return errors.New("read-by: a channel, members >= 2 and messages >= 1 are required")
	}
	cl := cfg.client()
	err := forEach(ctx, cfg.Members, 8, func(ctx context.Context, i int) error {
		return doJSON(ctx, cl, http.MethodPut, cfg.Target+"/v1/channels/"+cfg.Channel+"/members/"+cfg.member(i), []byte(`{}`))
	})
	if err != nil {
		return fmt.Errorf("joining %s: %w", cfg.Channel, err)
	}
	body := fmt.Sprintf(`{"seq":%d,"message_id":"m%d","sender_id":%q}`, cfg.Messages, cfg.Messages, cfg.member(0))
	if err := postJSON(ctx, cl, cfg.Target+"/v1/channels/"+cfg.Channel+"/messages", []byte(body)); err != nil {
		return fmt.Errorf("posting messages: %w", err)
	}
	var marks []mark
	for i := 1; i < cfg.Members; i++ {
		marks = append(marks, mark{user: cfg.member(i), channel: cfg.Channel, kind: "DELIVERED", seq: int64(cfg.Messages)})
		if r := int64(cfg.Messages * i / cfg.Members); r > 0 {
			marks = append(marks, mark{user: cfg.member(i), channel: cfg.Channel, kind: "READ", seq: r})
		}
	}
	for start := 0; start < len(marks); start += 100 {
		if _, err := postMarks(ctx, cl, cfg.Target, marks[start:min(start+100, len(marks))]); err != nil {
			return fmt.Errorf("marking: %w", err)
		}
	}
	// The answer must be the detailed one, or the figure measures the
	// wrong path.
	out, err := getBody(ctx, cl, fmt.Sprintf("%s/v1/channels/%s/messages/%d/receipts", cfg.Target, cfg.Channel, cfg.Messages/2))
	if err != nil {
		return err
	}
	var mr struct {
		Detailed bool `json:"detailed"`
	}
	if err := json.Unmarshal(out, &mr); err != nil {
		return fmt.Errorf("decoding receipts: %w", err)
	}
	if !mr.Detailed {
		return fmt.Errorf("read-by: %s answers counts only (more members than the gateway's --receipts-detail-threshold?)", cfg.Channel)
	}
	return nil
}

// RunReadBy measures, with one caller each, in Rounds interleaved rounds:
// Redis PING (when cfg.Ping is set), GET …/unread of one member for the
// channel, GET …/messages/{seq}/receipts of a random message (with its
// sender) and GET …/ticks; meanwhile ChannelRate messages/s are posted
// and read in the channel.
func RunReadBy(ctx context.Context, cfg ReadByConfig) (ReadByResult, error) {
	if cfg.Rounds < 1 || cfg.Duration <= 0 || cfg.Members < 2 || cfg.Messages < 1 {
		return ReadByResult{}, errors.New("read-by: rounds >= 1, a duration, members >= 2 and messages >= 1 are required")
	}
	cl := cfg.client()
	var head atomic.Int64
	head.Store(int64(cfg.Messages))
	type op struct {
		name string
		call func(ctx context.Context, rng *rand.Rand) error
	}
	var ops []op
	if cfg.Ping != nil {
		ops = append(ops, op{"ping", func(ctx context.Context, _ *rand.Rand) error { return cfg.Ping(ctx) }})
	}
	unreadURL := fmt.Sprintf("%s/v1/users/%s/unread?channel_id=%s", cfg.Target, cfg.member(1), cfg.Channel)
	ticksURL := fmt.Sprintf("%s/v1/channels/%s/ticks", cfg.Target, cfg.Channel)
	ops = append(ops,
		op{"unread", func(ctx context.Context, _ *rand.Rand) error { return doJSON(ctx, cl, http.MethodGet, unreadURL, nil) }},
		op{"receipts", func(ctx context.Context, rng *rand.Rand) error {
			seq := 1 + rng.Int64N(head.Load())
			return doJSON(ctx, cl, http.MethodGet, fmt.Sprintf("%s/v1/channels/%s/messages/%d/receipts?sender_id=%s",
				cfg.Target, cfg.Channel, seq, cfg.member(0)), nil)
		}},
		op{"ticks", func(ctx context.Context, _ *rand.Rand) error { return doJSON(ctx, cl, http.MethodGet, ticksURL, nil) }},
	)

	// The channel's own traffic: a message, then a member reading it.
	var res ReadByResult
	actx, stopActivity := context.WithCancel(ctx)
	var activity sync.WaitGroup
	if cfg.ChannelRate > 0 {
		activity.Go(func() {
			t := time.NewTicker(time.Duration(float64(time.Second) / cfg.ChannelRate))
			defer t.Stop()
			rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
			for {
				select {
				case <-actx.Done():
					return
				case <-t.C:
				}
				seq := head.Load() + 1
				body := fmt.Sprintf(`{"seq":%d,"message_id":"m%d","sender_id":%q}`, seq, seq, cfg.member(0))
				err := postJSON(actx, cl, cfg.Target+"/v1/channels/"+cfg.Channel+"/messages", []byte(body))
				if err == nil {
					head.Store(seq)
					_, err = postMarks(actx, cl, cfg.Target, []mark{{user: cfg.member(1 + rng.IntN(cfg.Members-1)), channel: cfg.Channel, kind: "READ", seq: seq}})
				}
				if actx.Err() != nil {
					return
				}
				if err != nil {
					res.ChannelErrors++
				} else {
					res.ChannelMarks++
				}
			}
		})
	}

	loops := make([]closedLoop, len(ops))
	res.Ops = make([]ReadByOp, len(ops))
	for range cfg.Rounds {
		for i, o := range ops {
			r := loops[i].run(ctx, 1, cfg.Duration, func(ctx context.Context, _ int, rng *rand.Rand) (int, error) {
				return 1, o.call(ctx, rng)
			})
			res.Ops[i] = ReadByOp{Name: o.name, Calls: r.Calls, Errors: r.Errors, Elapsed: res.Ops[i].Elapsed + r.Elapsed,
				Latency: r.Latency, FirstError: r.FirstError}
			if ctx.Err() != nil {
				break
			}
		}
	}
	stopActivity()
	activity.Wait()
	return res, ctx.Err()
}

// MoveLogConfig configures RunMoveLog.
type MoveLogConfig struct {
	Target string
	// Prefix names the channels ("<Prefix>s<size>") and their members
	// ("<Prefix>s<size>-m<i>").
	Prefix string
	// Sizes are the channels' member counts.
	Sizes []int
	// Events is the READ marks per channel, spread over its members in
	// turn, each at a seq above that member's last (every mark advances).
	Events int
	// Rate bounds the marks per second (batches of Batch).
	Rate  float64
	Batch int
	// WaitQuiet returns once the persister has consumed every mark sent.
	WaitQuiet func(context.Context) error
	// LogRows counts a channel's rows in the cursor-move log.
	LogRows func(ctx context.Context, channel string) (int64, error)
	// LoggedTotal, when set, reads the persister's
	// cursor_moves_logged_total counter (a cross-check of LogRows).
	LoggedTotal func(context.Context) (float64, error)
	Client      *http.Client
	// Progress, when set, gets a line per step.
	Progress func(string)
}

// MoveLogRow is one channel size's figures.
type MoveLogRow struct {
	Members        int
	Events         int64
	Advanced       int64
	Rows           int64
	CounterDelta   float64
	CounterChecked bool
	Elapsed        time.Duration
}

// RowsPerEvent is log rows per mark sent.
func (r MoveLogRow) RowsPerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.Rows) / float64(r.Events)
}

func (r MoveLogRow) String() string {
	s := fmt.Sprintf("members %5d: %d marks (%d advanced) in %s -> %d log rows = %.3f rows/mark",
		r.Members, r.Events, r.Advanced, r.Elapsed.Round(time.Millisecond), r.Rows, r.RowsPerEvent())
	if r.CounterChecked {
		s += fmt.Sprintf("; receipts_persister_cursor_moves_logged_total +%.0f", r.CounterDelta)
	}
	return s
}

// RunMoveLog measures each size in turn: it joins that many members to a
// fresh channel, posts Events messages, sends Events READ marks at Rate,
// waits for the persister, and counts the channel's log rows (and the
// counter's increase: nothing else may mark meanwhile for it to match).
func RunMoveLog(ctx context.Context, cfg MoveLogConfig) ([]MoveLogRow, error) {
	if len(cfg.Sizes) == 0 || cfg.Events < 1 || cfg.Batch < 1 || cfg.Batch > 500 || cfg.Rate <= 0 || cfg.WaitQuiet == nil || cfg.LogRows == nil {
		return nil, errors.New("move log: sizes, events >= 1, batch in [1, 500], a rate, WaitQuiet and LogRows are required")
	}
	cl := cfg.Client
	if cl == nil {
		cl = http.DefaultClient
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf(format, args...))
		}
	}
	var out []MoveLogRow
	for _, size := range cfg.Sizes {
		if size < 1 {
			return out, fmt.Errorf("move log: size %d", size)
		}
		ch := cfg.Prefix + "s" + strconv.Itoa(size)
		member := func(i int) string { return ch + "-m" + strconv.Itoa(i) }
		progress("%s: joining %d members", ch, size)
		err := forEach(ctx, size, 8, func(ctx context.Context, i int) error {
			return doJSON(ctx, cl, http.MethodPut, cfg.Target+"/v1/channels/"+ch+"/members/"+member(i), []byte(`{}`))
		})
		if err != nil {
			return out, fmt.Errorf("joining %s: %w", ch, err)
		}
		// No sender: a notice with one would move the sender's cursor.
		if err := postJSON(ctx, cl, cfg.Target+"/v1/channels/"+ch+"/messages", fmt.Appendf(nil, `{"seq":%d}`, cfg.Events)); err != nil {
			return out, fmt.Errorf("posting messages in %s: %w", ch, err)
		}
		if err := cfg.WaitQuiet(ctx); err != nil {
			return out, err
		}
		var before float64
		if cfg.LoggedTotal != nil {
			if before, err = cfg.LoggedTotal(ctx); err != nil {
				return out, err
			}
		}
		rowsBefore, err := cfg.LogRows(ctx, ch)
		if err != nil {
			return out, err
		}
		progress("%s: %d READ marks at %.0f/s", ch, cfg.Events, cfg.Rate)
		row := MoveLogRow{Members: size}
		start := time.Now()
		every := time.Duration(float64(cfg.Batch) / cfg.Rate * float64(time.Second))
		next := start
		for sent := 0; sent < cfg.Events; {
			var b []mark
			for ; sent < cfg.Events && len(b) < cfg.Batch; sent++ {
				b = append(b, mark{user: member(sent % size), channel: ch, kind: "READ", seq: int64(sent/size + 1)})
			}
			adv, err := postMarks(ctx, cl, cfg.Target, b)
			if err != nil {
				return out, fmt.Errorf("marking in %s: %w", ch, err)
			}
			row.Events += int64(len(b))
			row.Advanced += adv
			next = next.Add(every)
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return out, ctx.Err()
				case <-time.After(d):
				}
			}
		}
		row.Elapsed = time.Since(start)
		if err := cfg.WaitQuiet(ctx); err != nil {
			return out, err
		}
		rows, err := cfg.LogRows(ctx, ch)
		if err != nil {
			return out, err
		}
		row.Rows = rows - rowsBefore
		if cfg.LoggedTotal != nil {
			after, err := cfg.LoggedTotal(ctx)
			if err != nil {
				return out, err
			}
			row.CounterDelta, row.CounterChecked = after-before, true
		}
		progress("%s", row)
		out = append(out, row)
	}
	return out, nil
}

type mark struct {
	user, channel, kind string
	seq                 int64
}

// postMarks posts marks in one MarkReceipts call and returns how many
// advanced a cursor.
func postMarks(ctx context.Context, cl *http.Client, target string, marks []mark) (int64, error) {
	var b bytes.Buffer
	b.WriteString(`{"receipts":[`)
	for i, m := range marks {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"user_id":%q,"channel_id":%q,"kind":%q,"seq":%d,"message_id":"m%d"}`, m.user, m.channel, m.kind, m.seq, m.seq)
	}
	b.WriteString(`]}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target+"/v1/receipts:mark", &b)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("reading the mark response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST /v1/receipts:mark: http %d: %s", resp.StatusCode, truncate(string(raw), 200))
	}
	var mr markResponse
	if err := json.Unmarshal(raw, &mr); err != nil {
		return 0, fmt.Errorf("decoding the mark response: %w", err)
	}
	if len(mr.Results) != len(marks) {
		return 0, fmt.Errorf("POST /v1/receipts:mark: %d results for %d receipts", len(mr.Results), len(marks))
	}
	var adv int64
	for _, r := range mr.Results {
		if r.Advanced {
			adv++
		}
	}
	return adv, nil
}

// getBody GETs url and returns the body of a 200 answer.
func getBody(ctx context.Context, cl *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: http %d: %s", url, resp.StatusCode, truncate(strings.TrimSpace(string(out)), 200))
	}
	return out, nil
}

// forEach calls f for 0..n-1 from up to par goroutines; the first error
// stops the rest.
func forEach(ctx context.Context, n, par int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(par, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
