package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ThreadConfig configures SetupThreads and RunThreads.
type ThreadConfig struct {
	Target string
	// User is the user whose followed threads are listed.
	User string
	// Threads is how many threads the user follows, PerChannel roots in
	// each channel ("<User>-t<i>").
	Threads, PerChannel int
	// SetupConcurrency bounds the calls in flight while setting up.
	SetupConcurrency int
	Duration         time.Duration
	Concurrency      int
	// Limit is the limit of each ListThreads call.
	Limit  int
	Client *http.Client
}

func (c ThreadConfig) client() *http.Client {
	if c.Client == nil {
		return http.DefaultClient
	}
	return c.Client
}

// SetupThreads makes User and a peer members of the channels, posts the
// roots as channel messages (a root must be at or below its channel's
// head), then in each thread two replies from the peer, the first
// mentioning User, which makes User follow it with one unread mention
// and two unread replies. The replies go one per call through the REST
// route, as a chat backend would post them.
func SetupThreads(ctx context.Context, cfg ThreadConfig) error {
	if cfg.Threads < 1 || cfg.PerChannel < 1 || cfg.SetupConcurrency < 1 || cfg.User == "" {
		return errors.New("threads: a user, threads, per-channel and setup concurrency >= 1 are required")
	}
	cl := cfg.client()
	peer := cfg.User + "-peer"
	channels := (cfg.Threads + cfg.PerChannel - 1) / cfg.PerChannel
	chName := func(i int) string { return cfg.User + "-t" + strconv.Itoa(i) }
	err := inParallel(ctx, cfg.SetupConcurrency, channels, func(ctx context.Context, i int) error {
		ch := chName(i)
		for _, u := range []string{cfg.User, peer} {
			if err := doJSON(ctx, cl, http.MethodPut, cfg.Target+"/v1/channels/"+ch+"/members/"+u, []byte(`{"seq":0}`)); err != nil {
				return fmt.Errorf("joining %s: %w", ch, err)
			}
		}
		var b bytes.Buffer
		b.WriteString(`{"notices":[`)
		for seq := 1; seq <= cfg.PerChannel; seq++ {
			if seq > 1 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"channel_id":"%s","seq":%d,"sender_id":"%s"}`, ch, seq, peer)
		}
		b.WriteString(`]}`)
		if err := postJSON(ctx, cl, cfg.Target+"/v1/messages:notify", b.Bytes()); err != nil {
			return fmt.Errorf("posting roots in %s: %w", ch, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return inParallel(ctx, cfg.SetupConcurrency, cfg.Threads, func(ctx context.Context, t int) error {
		url := fmt.Sprintf("%s/v1/channels/%s/threads/%d/messages", cfg.Target, chName(t/cfg.PerChannel), t%cfg.PerChannel+1)
		for seq, mentions := range []string{`"` + cfg.User + `"`, ""} {
			body := fmt.Sprintf(`{"seq":%d,"message_id":"r%d","sender_id":"%s","mentions":[%s]}`, seq+1, seq+1, peer, mentions)
			if err := postJSON(ctx, cl, url, []byte(body)); err != nil {
				return fmt.Errorf("replying: %w", err)
			}
		}
		return nil
	})
}

// inParallel calls f for 0..n-1 with at most c calls at once; the first
// error stops the rest.
func inParallel(ctx context.Context, c, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	next := make(chan int)
	for range min(c, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// RunThreads lists User's followed threads (one page of Limit) in a
// closed loop; items are threads listed. A page shorter than
// min(Threads, Limit) is an error, so a setup that fell short cannot pass
// for a fast answer.
func RunThreads(ctx context.Context, cfg ThreadConfig) (ChannelLoadResult, error) {
	if cfg.Concurrency < 1 || cfg.User == "" || cfg.Limit < 1 {
		return ChannelLoadResult{}, errors.New("threads: a user, limit and concurrency >= 1 are required")
	}
	cl := cfg.client()
	url := cfg.Target + "/v1/users/" + cfg.User + "/threads?limit=" + strconv.Itoa(cfg.Limit)
	want := min(cfg.Threads, cfg.Limit)
	var l closedLoop
	return l.run(ctx, cfg.Concurrency, cfg.Duration, func(ctx context.Context, _ int, _ *rand.Rand) (int, error) {
		var page struct {
			Threads []struct{} `json:"threads"`
		}
		if err := getJSON(ctx, cl, url, &page); err != nil {
			return 0, err
		}
		if len(page.Threads) < want {
			return 0, fmt.Errorf("threads: %d listed, want %d", len(page.Threads), want)
		}
		return len(page.Threads), nil
	}), nil
}
