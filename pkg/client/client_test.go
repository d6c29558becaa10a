package client_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/client"
	"github.com/readstate/receipts/pkg/gatetest"
)

// testToken is the bearer token of the tests' gateways (scopes write,
// read, watch).
const testToken = "upstream-test-token-0123456789"

// authed is gatetest.Options for a gateway that requires testToken.
func authed(t *testing.T, more func(*gatetest.Config)) gatetest.Options {
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte("upstream:"+testToken+"\n"), 0o600))
	return gatetest.Options{Config: func(c *gatetest.Config) {
		c.Server.Auth.TokenFile = path
		if more != nil {
			more(c)
		}
	}}
}

// h2c is an HTTP client speaking HTTP/1.1 and unencrypted HTTP/2 (gRPC).
func h2c(t *testing.T) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// counter counts the attempts that reach the wire, per procedure: the
// retrier sits outside the caller's interceptors, so each attempt passes.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[req.Spec().Procedure]++
		c.mu.Unlock()
		return next(ctx, req)
	}
}

func (c *counter) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c *counter) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func (c *counter) get(procedure string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n["/receipts.v1.ReceiptService/"+procedure]
}

// newClient is a client of st with testToken, fast backoff (tests wait
// for the server's Retry-After, not for the backoff), counting attempts.
func newClient(t *testing.T, st *gatetest.Stack, cfg client.Config) (*client.Client, *counter) {
	t.Helper()
	cnt := &counter{}
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	if cfg.Retry.Backoff == (backoff.Config{}) {
		cfg.Retry.Backoff = backoff.Config{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond}
	}
	cfg.ConnectOptions = append(cfg.ConnectOptions, connect.WithInterceptors(cnt))
	c, err := client.New(st.URL, h2c(t), cfg)
	require.NoError(t, err)
	return c, cnt
}

func notify(t *testing.T, c *client.Client, ch string, seq int64) {
	t.Helper()
	_, err := c.NotifyMessage(context.Background(), connect.NewRequest(&receiptsv1.NotifyMessageRequest{
		ChannelId: ch, Seq: seq, MessageId: "m", SenderId: "bob",
	}))
	require.NoError(t, err)
}

// TestMarkRoundTrip: over each protocol, a mark with the token comes back
// durable in Kafka and advanced, and the read state shows it.
func TestMarkRoundTrip(t *testing.T) {
	t.Parallel()
	st := gatetest.Start(t, authed(t, nil))
	for name, p := range map[string]client.Protocol{"connect": client.ProtocolConnect, "grpc": client.ProtocolGRPC, "grpcweb": client.ProtocolGRPCWeb} {
		t.Run(name, func(t *testing.T) {
			c, _ := newClient(t, st, client.Config{Protocol: p})
			ctx := context.Background()
			notify(t, c, "general-"+name, 10)
			res, err := c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "general-" + name, Seq: 7}))
			require.NoError(t, err)
			r := res.Msg.GetResult()
			require.Equal(t, receiptsv1.Durability_KAFKA, r.GetDurability())
			require.False(t, r.GetRealtimeDegraded())
			require.Equal(t, client.Outcome{Kafka: 1, Advanced: 1}, client.Summarize(r))

			batch, err := c.MarkReceipts(ctx, connect.NewRequest(&receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{
				{UserId: "alice", ChannelId: "general-" + name, Kind: receiptsv1.Kind_READ, Seq: 5}, // behind: a no-op
				{UserId: "alice", ChannelId: "general-" + name, Kind: receiptsv1.Kind_DELIVERED, Seq: 9},
			}}))
			require.NoError(t, err)
			require.Equal(t, client.Outcome{Kafka: 2, Advanced: 1}, client.Summarize(batch.Msg.GetResults()...))

			rs, err := c.GetReadState(ctx, connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: "alice", ChannelId: []string{"general-" + name}}))
			require.NoError(t, err)
			require.Len(t, rs.Msg.GetChannels(), 1)
			require.Equal(t, int64(7), rs.Msg.GetChannels()[0].GetRead().GetPosition().GetSeq())
			require.Equal(t, int64(9), rs.Msg.GetChannels()[0].GetDelivered().GetPosition().GetSeq())

			// Each protocol carries the reason and the Retry-After (a
			// header, or a gRPC trailer).
			once, _ := newClient(t, st, client.Config{Protocol: p, Retry: client.RetryPolicy{MaxAttempts: 1}})
			_, err = once.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "general-" + name, Seq: 11}))
			require.Equal(t, string(apierr.HeadBehind), client.Reason(err), "%v", err)
			require.Equal(t, time.Second, client.RetryAfter(err))
			require.True(t, client.IsRetryable(err))
		})
	}
}

// TestRealtimeDegradedSurfaced: with Redis down a mark is still durable
// (Kafka) and says the real-time view is degraded; MarkUnread, which
// needs Redis, is Unavailable and not retried (its epoch may have moved).
func TestRealtimeDegradedSurfaced(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = down.Close() })
	st := gatetest.Start(t, authed(t, func(c *gatetest.Config) { c.Gate.Redis = down; c.Gate.AllowNonMemberMarks = true }))
	c, cnt := newClient(t, st, client.Config{})
	ctx := context.Background()

	res, err := c.MarkDelivered(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "general", Seq: 3}))
	require.NoError(t, err)
	o := client.Summarize(res.Msg.GetResult())
	require.Equal(t, 1, o.Kafka)
	require.Equal(t, 1, o.Degraded, "the real-time view was not updated")

	_, err = c.MarkUnread(ctx, connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: "alice", ChannelId: "general", Seq: 2}))
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "%v", err)
	require.True(t, client.IsRetryable(err))
	require.Equal(t, 1, cnt.get("MarkUnread"), "mark-unread is not repeated on an ambiguous failure")
}

// TestRetryHeadBehind: a read beyond the head is refused (HEAD_BEHIND,
// Retry-After 1); the notice arrives while the client waits, and the
// retry succeeds. The wait was at least the server's Retry-After.
func TestRetryHeadBehind(t *testing.T) {
	t.Parallel()
	st := gatetest.Start(t, authed(t, nil))
	plain, _ := newClient(t, st, client.Config{Retry: client.RetryPolicy{MaxAttempts: 1}})
	notify(t, plain, "general", 2)
	var retries []client.Retry
	c, cnt := newClient(t, st, client.Config{Retry: client.RetryPolicy{OnRetry: func(r client.Retry) {
		retries = append(retries, r)
		if len(retries) == 1 {
			notify(t, plain, "general", 4) // the notice arrives late
		}
	}}})
	res, err := c.MarkRead(context.Background(), connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "general", Seq: 4}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetResult().GetAdvanced())
	require.Equal(t, 2, cnt.get("MarkRead"))
	require.Len(t, retries, 1)
	require.Equal(t, string(apierr.HeadBehind), client.Reason(retries[0].Err))
	require.Equal(t, time.Second, client.RetryAfter(retries[0].Err))
	require.GreaterOrEqual(t, retries[0].Wait, time.Second, "the server's Retry-After is the least wait")

	// Mark-unread beyond the head: refused before anything is written,
	// so it is retried too, until the attempts run out.
	c2, cnt2 := newClient(t, st, client.Config{Retry: client.RetryPolicy{MaxAttempts: 2}})
	_, err = c2.MarkUnread(context.Background(), connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: "alice", ChannelId: "general", Seq: 9}))
	require.Equal(t, string(apierr.HeadBehind), client.Reason(err), "%v", err)
	require.Equal(t, 2, cnt2.get("MarkUnread"))
}

// TestNoRetryOnCallerErrors: InvalidArgument, Unauthenticated, and
// PermissionDenied-class refusals are answered after one attempt.
func TestNoRetryOnCallerErrors(t *testing.T) {
	t.Parallel()
	st := gatetest.Start(t, authed(t, nil))
	var retried atomic.Int32
	cfg := client.Config{Retry: client.RetryPolicy{OnRetry: func(client.Retry) { retried.Add(1) }}}
	c, cnt := newClient(t, st, cfg)
	_, err := c.MarkRead(context.Background(), connect.NewRequest(&receiptsv1.MarkRequest{UserId: "al:ice", ChannelId: "general", Seq: 1}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.Equal(t, string(apierr.InvalidID), client.Reason(err))
	require.False(t, client.IsRetryable(err))
	require.Equal(t, 1, cnt.get("MarkRead"), "one attempt")

	cfg.Token = "not-the-token-0123456789"
	bad, badCnt := newClient(t, st, cfg)
	_, err = bad.GetReadState(context.Background(), connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: "alice"}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
	require.Equal(t, string(apierr.CredentialsInvalid), client.Reason(err))
	require.Equal(t, 1, badCnt.get("GetReadState"), "one attempt")
	require.Zero(t, retried.Load())
}

// TestRetryAfterHonoured: a rate-limited call waits the server's
// Retry-After (one token a second) before its retry, so it takes exactly
// two attempts although the backoff alone would have made many in that
// second; with a deadline shorter than the Retry-After it does not wait
// at all.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	st := gatetest.Start(t, authed(t, func(c *gatetest.Config) {
		c.Server.Auth.RateLimit, c.Server.Auth.RateLimitBurst, c.Gate.MaxBatchItems = 1, 2, 2
	}))
	var waits []time.Duration
	c, cnt := newClient(t, st, client.Config{Retry: client.RetryPolicy{
		MaxAttempts: 20, // the backoff (5ms..50ms) would spend them all within the second
		OnRetry:     func(r client.Retry) { waits = append(waits, r.Wait) },
	}})
	req := func() *connect.Request[receiptsv1.GetSettingsRequest] {
		return connect.NewRequest(&receiptsv1.GetSettingsRequest{UserId: "alice"})
	}
	ctx := context.Background()
	// Spend the burst; a call (its attempts) never gets more than one
	// event back per second.
	for range 2 {
		_, err := c.GetSettings(ctx, req())
		require.NoError(t, err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err := c.GetSettings(short, req())
	require.Equal(t, string(apierr.RateLimited), client.Reason(err), "%v", err)
	require.Equal(t, time.Second, client.RetryAfter(err))
	require.Empty(t, waits, "a wait past the deadline is not begun")
	require.Equal(t, 3, cnt.get("GetSettings"))

	_, err = c.GetSettings(ctx, req())
	require.NoError(t, err)
	require.Equal(t, 5, cnt.get("GetSettings"), "refused once, then one retry after Retry-After")
	require.Len(t, waits, 1)
	require.GreaterOrEqual(t, waits[0], time.Second)
}

// TestChannelMembersPages: the members of a channel come over several
// GetChannel pages, each member once, in the server's order.
func TestChannelMembersPages(t *testing.T) {
	t.Parallel()
	st := gatetest.Start(t, authed(t, nil))
	c, cnt := newClient(t, st, client.Config{})
	ctx := context.Background()
	var want []string
	for _, u := range []string{"ann", "bea", "cid", "dan", "eve", "fay", "gus"} {
		_, err := c.JoinChannel(ctx, connect.NewRequest(&receiptsv1.JoinChannelRequest{ChannelId: "general", UserId: u}))
		require.NoError(t, err)
		want = append(want, u)
	}
	var got []string
	for m, err := range c.ChannelMembers(ctx, "general", 3) {
		require.NoError(t, err)
		got = append(got, m)
	}
	require.ElementsMatch(t, want, got)
	require.Len(t, got, len(want), "no member twice")
	require.Equal(t, 3, cnt.get("GetChannel"), "pages of 3, 3 and 1")

	// Breaking out fetches no further page.
	for range c.ChannelMembers(ctx, "general", 3) {
		break
	}
	require.Equal(t, 4, cnt.get("GetChannel"))

	// A failure ends the sequence with the error.
	n := 0
	for m, err := range c.ChannelMembers(ctx, "bad:channel", 3) {
		require.Empty(t, m)
		require.Equal(t, string(apierr.InvalidID), client.Reason(err))
		n++
	}
	require.Equal(t, 1, n)
}
