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
	"sync"
	"sync/atomic"
	"time"
)

// The channel load: message notices through the stack, and the
// latency of a user's unread answer. Both drive the gateway's REST routes
// with a closed loop of Concurrency callers; figures in BENCHMARKS.md.

// NoticeConfig configures RunNotices.
type NoticeConfig struct {
	// Target is the gateway's base URL.
	Target string
	// Duration of the run.
	Duration time.Duration
	// Concurrency is the number of callers, each with one call in flight.
	Concurrency int
	// Batch is the notices per NotifyMessages call (≤ 500).
	Batch int
	// Channels and Users are the id spaces ("<Prefix>c<i>", "<Prefix>u<i>").
	Channels, Users int
	// Mentions is the mentioned users per notice.
	Mentions int
	Prefix   string
	Client   *http.Client
}

// ChannelLoadResult is what a channel load run measured.
type ChannelLoadResult struct {
	// Items are notices (RunNotices) or unread answers (RunUnread).
	Items, Calls, Errors int64
	Elapsed              time.Duration
	Latency              Percentiles
	// FirstError is the first failure's message.
	FirstError string
}

// Rate is items per second.
func (r ChannelLoadResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Items) / r.Elapsed.Seconds()
}

func (r ChannelLoadResult) String() string {
	s := fmt.Sprintf("%d items in %d calls over %s: %.0f/s; call latency %s; %d errors",
		r.Items, r.Calls, r.Elapsed.Round(time.Millisecond), r.Rate(), r.Latency, r.Errors)
	if r.FirstError != "" {
		s += " (first: " + r.FirstError + ")"
	}
	return s
}

type closedLoop struct {
	hist     histogram
	items    atomic.Int64
	calls    atomic.Int64
	errs     atomic.Int64
	firstErr sync.Once
	first    string
}

// run calls call from n callers until d passes or ctx ends; call returns
// the items it carried.
func (l *closedLoop) run(ctx context.Context, n int, d time.Duration, call func(ctx context.Context, worker int, rng *rand.Rand) (int, error)) ChannelLoadResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range n {
		rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
		wg.Go(func() {
			for ctx.Err() == nil {
				t := time.Now()
				items, err := call(ctx, w, rng)
				if ctx.Err() != nil && err != nil {
					return // the run ended mid-call
				}
				l.calls.Add(1)
				if err != nil {
					l.errs.Add(1)
					l.firstErr.Do(func() { l.first = err.Error() })
					continue
				}
				l.hist.Record(time.Since(t))
				l.items.Add(int64(items))
			}
		})
	}
	wg.Wait()
	return ChannelLoadResult{Items: l.items.Load(), Calls: l.calls.Load(), Errors: l.errs.Load(),
		Elapsed: time.Since(start), Latency: l.hist.Percentiles(), FirstError: l.first}
}

// RunNotices posts message notices (NotifyMessages, Batch per call) on
// random channels, each channel's seqs dense (one counter per channel),
// from random senders mentioning random users.
func RunNotices(ctx context.Context, cfg NoticeConfig) (ChannelLoadResult, error) {
	if cfg.Batch < 1 || cfg.Batch > 500 || cfg.Channels < 1 || cfg.Users < 1 || cfg.Concurrency < 1 || cfg.Mentions < 0 {
		return ChannelLoadResult{}, errors.New("notices: batch must be in [1, 500], channels, users and concurrency >= 1, mentions >= 0")
	}
	client := cfg.Client
	if client == nil {
		client = http.DefaultClient
	}
	seqs := make([]atomic.Int64, cfg.Channels)
	var l closedLoop
	res := l.run(ctx, cfg.Concurrency, cfg.Duration, func(ctx context.Context, _ int, rng *rand.Rand) (int, error) {
		var b bytes.Buffer
		b.WriteString(`{"notices":[`)
		for i := range cfg.Batch {
			c := rng.IntN(cfg.Channels)
			seq := seqs[c].Add(1)
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"channel_id":"%sc%d","seq":%d,"message_id":"m%d","sender_id":"%su%d","mentions":[`,
				cfg.Prefix, c, seq, seq, cfg.Prefix, rng.IntN(cfg.Users))
			for m := range cfg.Mentions {
				if m > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `"%su%d"`, cfg.Prefix, rng.IntN(cfg.Users))
			}
			b.WriteString(`]}`)
		}
		b.WriteString(`]}`)
		return cfg.Batch, postJSON(ctx, client, cfg.Target+"/v1/messages:notify", b.Bytes())
	})
	return res, nil
}

// UnreadConfig configures SetupUnread and RunUnread.
type UnreadConfig struct {
	Target string
	// User is the user whose unread answer is read.
	User string
	// Channels is how many channels the user is a member of
	// ("<User>-c<i>").
	Channels    int
	Duration    time.Duration
	Concurrency int
	Client      *http.Client
	// PageSize is the page_size of each call (0: the server's default);
	// AllPages makes one call walk every page of the default set.
	PageSize int
	AllPages bool
	// Inbox reads the user's inbox (its first page of InboxLimit lines) in
	// place of the unread answer.
	Inbox      bool
	InboxLimit int
	// Deletions is how many of each channel's messages the setup deletes
	// (from its second on, so each counts in the unread answer).
	Deletions int
}

func (c UnreadConfig) client() *http.Client {
	if c.Client == nil {
		return http.DefaultClient
	}
	return c.Client
}

// SetupUnread makes User a member of Channels channels, each with ten
// messages from another user, two of which mention User, so every
// channel answers non-zero counts.
func SetupUnread(ctx context.Context, cfg UnreadConfig) error {
	cl := cfg.client()
	for i := range cfg.Channels {
		ch := cfg.User + "-c" + strconv.Itoa(i)
		if err := doJSON(ctx, cl, http.MethodPut, cfg.Target+"/v1/channels/"+ch+"/members/"+cfg.User, []byte(`{"seq":0}`)); err != nil {
			return fmt.Errorf("joining %s: %w", ch, err)
		}
	}
	const perChannel = 10
	for start := 0; start < cfg.Channels; start += 50 {
		var b bytes.Buffer
		b.WriteString(`{"notices":[`)
		for i := start; i < min(start+50, cfg.Channels); i++ {
			for seq := 1; seq <= perChannel; seq++ {
				if b.Len() > len(`{"notices":[`) {
					b.WriteByte(',')
				}
				mentions := ""
				if seq%5 == 0 {
					mentions = `"` + cfg.User + `"`
				}
				if seq >= 2 && seq < 2+cfg.Deletions {
					fmt.Fprintf(&b, `{"channel_id":"%s-c%d","seq":%d,"deleted":true}`, cfg.User, i, seq)
					continue
				}
				fmt.Fprintf(&b, `{"channel_id":"%s-c%d","seq":%d,"sender_id":"%s-peer","mentions":[%s]}`, cfg.User, i, seq, cfg.User, mentions)
			}
		}
		b.WriteString(`]}`)
		if err := postJSON(ctx, cl, cfg.Target+"/v1/messages:notify", b.Bytes()); err != nil {
			return fmt.Errorf("posting messages: %w", err)
		}
	}
	return nil
}

// RunUnread reads User's unread answer (the default set: every channel
// the user is in) in a closed loop.
func RunUnread(ctx context.Context, cfg UnreadConfig) (ChannelLoadResult, error) {
	if cfg.Concurrency < 1 || cfg.User == "" {
		return ChannelLoadResult{}, errors.New("unread: a user and concurrency >= 1 are required")
	}
	cl := cfg.client()
	base := cfg.Target + "/v1/users/" + cfg.User + "/unread"
	switch {
	case cfg.Inbox:
		base = cfg.Target + "/v1/users/" + cfg.User + "/inbox?limit=" + strconv.Itoa(max(cfg.InboxLimit, 1))
	case cfg.PageSize > 0:
		base += "?page_size=" + strconv.Itoa(cfg.PageSize)
	}
	var l closedLoop
	return l.run(ctx, cfg.Concurrency, cfg.Duration, func(ctx context.Context, _ int, _ *rand.Rand) (int, error) {
		url, pages := base, 0
		for {
			var page struct {
				NextPageToken string `json:"nextPageToken"`
			}
			// A single page is read whole but not decoded: decoding an
			// answer of a thousand channels cost the tool about as much CPU
			// as the gateway spent on it, taken from the co-located stack.
			var out any
			if cfg.AllPages {
				out = &page
			}
			if err := getJSON(ctx, cl, url, out); err != nil {
				return pages, err
			}
			pages++
			if !cfg.AllPages || page.NextPageToken == "" {
				return pages, nil
			}
			sep := "?"
			if cfg.PageSize > 0 {
				sep = "&"
			}
			url = base + sep + "page_token=" + page.NextPageToken
		}
	}), nil
}

// bodyBufs keeps the readers' answer buffers: reading a 1.7 MB answer
// into a fresh buffer, grown a dozen times, cost the tool about a
// millisecond a call on the cores it shares with the stack it measures.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// getJSON reads a GET answer whole (an unread page of 10,000 channels is
// about 1.7 MB) and decodes it into out (nil: not decoded).
func getJSON(ctx context.Context, cl *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := bodyBufs.Get().(*bytes.Buffer)
	defer bodyBufs.Put(buf)
	buf.Reset()
	const most = 16 << 20
	if n := resp.ContentLength; n > 0 && n <= most {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom asks for MinRead more at the end
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, most)); err != nil {
		return err
	}
	body := buf.Bytes()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: http %d: %s", url, resp.StatusCode, truncate(string(body), 200))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

func postJSON(ctx context.Context, cl *http.Client, url string, body []byte) error {
	return doJSON(ctx, cl, http.MethodPost, url, body)
}

func doJSON(ctx context.Context, cl *http.Client, method, url string, body []byte) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: http %d: %s", method, url, resp.StatusCode, truncate(string(out), 200))
	}
	return nil
}
