package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/client"
	"github.com/readstate/receipts/pkg/gatetest"
)

// watcher collects what a Watch yields.
type watcher struct {
	mu     sync.Mutex
	events []*receiptsv1.WatchEvent
	err    error
	done   bool
}

func (w *watcher) run(ctx context.Context, c *client.Client, channels ...string) {
	go func() {
		for ev, err := range c.Watch(ctx, &receiptsv1.WatchChannelsRequest{ChannelId: channels}) {
			w.mu.Lock()
			if err != nil {
				w.err = err
			} else {
				w.events = append(w.events, ev)
			}
			w.mu.Unlock()
		}
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	}()
}

// reads is every READ position of user the stream brought, in order.
func (w *watcher) reads(user string) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var seqs []int64
	for _, ev := range w.events {
		for _, u := range ev.GetUpdates() {
			if u.GetUserId() == user && u.GetKind() == receiptsv1.Kind_READ {
				seqs = append(seqs, u.GetPosition().GetSeq())
			}
		}
	}
	return seqs
}

// await polls until the stream has brought want for user (or fails).
func (w *watcher) await(t *testing.T, user string, want ...int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		w.mu.Lock()
		failed := w.err != nil
		w.mu.Unlock()
		return failed || len(w.reads(user)) >= len(want)
	}, 10*time.Second, 5*time.Millisecond, "waiting for reads %v of %s", want, user)
	w.mu.Lock()
	require.NoError(t, w.err)
	w.mu.Unlock()
	require.Equal(t, want, w.reads(user))
}

func markRead(t *testing.T, c *client.Client, user, ch string, seq int64) {
	t.Helper()
	_, err := c.MarkRead(context.Background(), connect.NewRequest(&receiptsv1.MarkRequest{UserId: user, ChannelId: ch, Seq: seq}))
	require.NoError(t, err)
}

// TestWatchResumesAcrossRestart: the gateway drains (its watch streams end
// with Unavailable) and stays down while a mark lands through another
// replica; when it is back on the same address the watcher resumes from
// its last token and gets that mark once, before and after which nothing
// is missed or repeated.
func TestWatchResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	st := gatetest.Start(t, authed(t, nil))
	other, err := client.New(st.Replica(), h2c(t), client.Config{Token: testToken})
	require.NoError(t, err)
	var reconnects atomic.Int32
	c, _ := newClient(t, st, client.Config{Retry: client.RetryPolicy{
		MaxAttempts: 1000, // the gateway is down for as long as the test says
		OnRetry: func(r client.Retry) {
			if r.Procedure == receiptsv1connect.ReceiptServiceWatchChannelsProcedure {
				reconnects.Add(1)
			}
		},
	}})
	// Only channels with registered members have a view to watch.
	for _, u := range []string{"alice", "bob"} {
		_, err := c.JoinChannel(context.Background(), connect.NewRequest(&receiptsv1.JoinChannelRequest{ChannelId: "general", UserId: u}))
		require.NoError(t, err)
	}
	notify(t, c, "general", 10)

	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{}
	w.run(ctx, c, "general")
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.events) > 0
	}, 10*time.Second, 5*time.Millisecond, "the fresh stream's snapshot")
	w.mu.Lock()
	require.NotEmpty(t, w.events[0].GetSnapshot())
	w.mu.Unlock()

	markRead(t, c, "alice", "general", 1)
	w.await(t, "alice", 1)

	st.Stop()
	markRead(t, other, "alice", "general", 2) // while the watcher cannot connect
	st.Restart()
	w.await(t, "alice", 1, 2)
	require.Positive(t, reconnects.Load())

	markRead(t, c, "alice", "general", 3)
	w.await(t, "alice", 1, 2, 3)

	cancel()
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.done
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, w.err, "canceling ends the watch without an error")
}

// TestWatchFailsForGood: a refusal that no retry can change (a channel id
// that is not valid) ends the watch with that error after one attempt.
func TestWatchFailsForGood(t *testing.T) {
	t.Parallel()
	st := gatetest.Start(t, authed(t, nil))
	c, _ := newClient(t, st, client.Config{Retry: client.RetryPolicy{OnRetry: func(client.Retry) { t.Error("retried") }}})
	var errs []error
	for ev, err := range c.Watch(context.Background(), &receiptsv1.WatchChannelsRequest{ChannelId: []string{"bad:channel"}}) {
		require.Nil(t, ev)
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(errs[0]))
}
