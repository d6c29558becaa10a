package gate_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/gatetest"
	"github.com/readstate/receipts/pkg/views/readby"
	"github.com/readstate/receipts/pkg/watch"
)

// startCappedHub is startHub with MaxStreamsPerClient.
func startCappedHub(t *testing.T, tb *testBundle, perClient int) *watch.Hub {
	t.Helper()
	return gatetest.StartHubConfig(t, watch.Config{Redis: tb.rdb, Keys: readby.NewStore(nil, tb.store), MaxStreamsPerClient: perClient})
}

// openSSE opens a server-sent events watch stream and reads its opening
// comment, or the body of its refusal; the stream stays open until the
// test ends or close is called.
func openSSE(t *testing.T, client *http.Client, base, channel string) (status int, retryAfter string, refusal []byte, close func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/channels:watch?channel_id="+channel, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	if resp.StatusCode == http.StatusOK {
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(line, ": watching"), line)
	} else {
		refusal, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
	}
	stop := func() { cancel(); _ = resp.Body.Close() }
	t.Cleanup(stop)
	return resp.StatusCode, resp.Header.Get("Retry-After"), refusal, stop
}

// TestWatchStreamsPerClient: a client (here its address: the API is open)
// holds at most MaxStreamsPerClient streams on a replica, whichever the
// protocol; the next one is refused with 429 / ResourceExhausted and
// Retry-After, and one that ends frees its place.
func TestWatchStreamsPerClient(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	base, _ := replica(t, tb, startCappedHub(t, tb, 2))
	// Each stream its own connection (HTTP/1.1 holds one per request).
	h1 := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0}}
	t.Cleanup(h1.CloseIdleConnections)

	status, _, _, closeFirst := openSSE(t, h1, base, "a")
	require.Equal(t, http.StatusOK, status)
	status, _, _, _ = openSSE(t, h1, base, "b")
	require.Equal(t, http.StatusOK, status)

	// The third, over server-sent events: 429 with Retry-After.
	status, retry, refusal, _ := openSSE(t, h1, base, "c")
	apierrtest.RefusedREST(t, status, refusal, http.StatusTooManyRequests, apierr.StreamLimit)
	require.Equal(t, "5", retry)

	// Over gRPC and Connect: ResourceExhausted with Retry-After.
	for _, opt := range []connect.ClientOption{connect.WithGRPC(), connect.WithProtoJSON()} {
		client := receiptsv1connect.NewReceiptServiceClient(tb.h2c, base, opt)
		stream, err := client.WatchChannels(context.Background(), connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"c"}}))
		require.NoError(t, err)
		require.False(t, stream.Receive())
		apierrtest.Refused(t, stream.Err(), connect.CodeResourceExhausted, apierr.StreamLimit)
		require.Contains(t, stream.Err().Error(), "too many watch streams of this client")
		ce, ok := stream.Err().(*connect.Error)
		require.True(t, ok)
		retry := ce.Meta().Get("Retry-After")
		if retry == "" {
			retry = stream.ResponseTrailer().Get("Retry-After")
		}
		require.Equal(t, "5", retry)
		require.NoError(t, stream.Close())
	}

	// A stream that ends gives its place back.
	closeFirst()
	require.Eventually(t, func() bool {
		status, _, _, stop := openSSE(t, h1, base, "d")
		stop()
		return status == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond)
}

// TestWatchHeartbeatOverRPC: a quiet gRPC stream gets heartbeats, events
// without updates or snapshot that carry the last resume token.
func TestWatchHeartbeatOverRPC(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Server.WatchHeartbeat = 30 * time.Millisecond }})
	base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	client := receiptsv1connect.NewReceiptServiceClient(tb.h2c, base, connect.WithGRPC())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := client.WatchChannels(ctx, connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"quiet"}}))
	require.NoError(t, err)
	require.True(t, stream.Receive(), "%v", stream.Err())
	opening := stream.Msg()
	require.Len(t, opening.GetSnapshot(), 1)
	for range 2 {
		require.True(t, stream.Receive(), "%v", stream.Err())
		hb := stream.Msg()
		require.Empty(t, hb.GetUpdates())
		require.Empty(t, hb.GetSnapshot())
		require.Equal(t, opening.GetResumeToken(), hb.GetResumeToken())
	}
}
