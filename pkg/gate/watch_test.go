package gate_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/gatetest"
	"github.com/readstate/receipts/pkg/watch"
)

// startHub runs a watch hub on the test's Redis prefix until the test
// ends (gatetest.StartHub).
func startHub(t *testing.T, rdb redis.UniversalClient, prefix string) *watch.Hub {
	t.Helper()
	return gatetest.StartHub(t, rdb, prefix)
}

// replica starts another gateway on tb's backends with hub, as a second
// kafkagate replica (its own metrics registry).
func replica(t *testing.T, tb *testBundle, hub *watch.Hub) (base string, stop func()) {
	t.Helper()
	cfg := tb.cfg
	cfg.Watch = hub
	reg := prometheus.NewRegistry()
	cfg.Registerer, cfg.Server.Registerer, cfg.Durable.Registerer = reg, reg, reg
	_, _, base, stop = startGate(t, cfg)
	return base, stop
}

// viewModel writes the channel view as the gateway's channel-view script
// does (cursor and stream entry together), and keeps the highest seq
// written per "channel/user/KIND".
type viewModel struct {
	rdb    *redis.Client
	prefix string
	mu     sync.Mutex
	want   map[string]int64
}

func (v *viewModel) mark(t *testing.T, ch, user string, kind receiptsv1.Kind, seq int64) {
	t.Helper()
	k := map[receiptsv1.Kind]string{receiptsv1.Kind_READ: "r", receiptsv1.Kind_DELIVERED: "d"}[kind]
	ctx, at := context.Background(), strconv.FormatInt(time.Now().UnixMilli(), 10)
	_, err := v.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, v.prefix+"cv:{"+ch+"}:cur", k+":"+user, "0:"+strconv.FormatInt(seq, 10)+":"+at)
		p.XAdd(ctx, &redis.XAddArgs{Stream: v.prefix + "cv:{" + ch + "}:s", MaxLen: 10000, Approx: true,
			Values: []any{"u", user, "k", k, "e", "0", "s", strconv.FormatInt(seq, 10), "t", at}})
		return nil
	})
	require.NoError(t, err)
	v.mu.Lock()
	defer v.mu.Unlock()
	key := ch + "/" + user + "/" + kind.String()
	v.want[key] = max(v.want[key], seq)
}

func (v *viewModel) snapshot() map[string]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]int64, len(v.want))
	for k, s := range v.want {
		out[k] = s
	}
	return out
}

// folded is what a watcher has seen: the highest seq per key.
type folded struct {
	mu      sync.Mutex
	highest map[string]int64
	token   string
	events  int
	dup     string // a key seen twice in one event, if ever
	snaps   int
}

func (f *folded) add(ev *receiptsv1.WatchEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.highest == nil {
		f.highest = map[string]int64{}
	}
	f.events++
	f.token = ev.GetResumeToken()
	if len(ev.GetSnapshot()) > 0 {
		f.snaps++
	}
	in := map[string]bool{}
	for _, u := range ev.GetUpdates() {
		k := u.GetChannelId() + "/" + u.GetUserId() + "/" + u.GetKind().String()
		if in[k] {
			f.dup = k
		}
		in[k] = true
		f.highest[k] = max(f.highest[k], u.GetPosition().GetSeq())
	}
	for _, s := range ev.GetSnapshot() {
		for _, m := range s.GetMembers() {
			if m.GetRead() != nil {
				k := s.GetChannelId() + "/" + m.GetUserId() + "/READ"
				f.highest[k] = max(f.highest[k], m.GetRead().GetSeq())
			}
			if m.GetDelivered() != nil {
				k := s.GetChannelId() + "/" + m.GetUserId() + "/DELIVERED"
				f.highest[k] = max(f.highest[k], m.GetDelivered().GetSeq())
			}
		}
	}
}

func (f *folded) equals(want map[string]int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.highest) != len(want) {
		return false
	}
	for k, v := range want {
		if f.highest[k] != v {
			return false
		}
	}
	return true
}

// watchSSE opens the server-sent events route and folds its events until
// ctx ends; it returns when the stream is open.
func watchSSE(t *testing.T, ctx context.Context, client *http.Client, base string, channels []string, lastEventID string, f *folded) <-chan error {
	t.Helper()
	return watchSSEEvents(t, ctx, client, base, channels, lastEventID, f.add)
}

// watchSSEEvents opens the server-sent events route and hands each event
// to add until ctx ends; it returns when the stream is open.
func watchSSEEvents(t *testing.T, ctx context.Context, client *http.Client, base string, channels []string, lastEventID string, add func(*receiptsv1.WatchEvent)) <-chan error {
	t.Helper()
	q := url.Values{"channel_id": channels}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/channels:watch?"+q.Encode(), nil)
	require.NoError(t, err)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, 1, resp.ProtoMajor, "served over HTTP/1.1")
	done := make(chan error, 1)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var id string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: error"):
				// Its data line is the REST error body.
				sc.Scan()
				data := strings.TrimPrefix(sc.Text(), "data: ")
				done <- fmt.Errorf("error event, reason %s: %s", apierr.InfoOfREST([]byte(data)).GetReason(), data)
				return
			case strings.HasPrefix(line, "data: "):
				var ev receiptsv1.WatchEvent
				if err := protojson.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
					done <- err
					return
				}
				if ev.GetResumeToken() != id {
					done <- fmt.Errorf("id %q is not the event's token %q", id, ev.GetResumeToken())
					return
				}
				add(&ev)
			}
		}
		done <- sc.Err()
	}()
	return done
}

// TestWatchTwoReplicas: a gRPC watcher on one gateway and a server-sent
// events watcher on another both see every change of the view, coalesced
// to the highest per key; the SSE watcher disconnects, changes go on, and
// it resumes on the other replica from its last event id with no gap.
func TestWatchTwoReplicas(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	// Two replicas with a hub each (setup's own gate has none).
	urlA, stopA := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	urlB, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))

	v := &viewModel{rdb: tb.rdb, prefix: tb.prefix, want: map[string]int64{}}
	channels := []string{"w1", "w2"}
	v.mark(t, "w1", "early", receiptsv1.Kind_READ, 7) // before anyone watches

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grpcClient := receiptsv1connect.NewReceiptServiceClient(tb.h2c, urlA, connect.WithGRPC())
	stream, err := grpcClient.WatchChannels(ctx, connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: channels}))
	require.NoError(t, err)
	var viaGRPC folded
	grpcDone := make(chan error, 1)
	go func() {
		for stream.Receive() {
			viaGRPC.add(stream.Msg())
		}
		grpcDone <- stream.Err()
	}()
	sseCtx, sseCancel := context.WithCancel(ctx)
	var viaSSE folded
	sseDone := watchSSE(t, sseCtx, tb.h1, urlB, channels, "", &viaSSE)

	// Concurrent writers: 4 users × 2 kinds × 2 channels, 40 advances each.
	write := func(users []string, from, to int64) {
		var wg sync.WaitGroup
		for _, u := range users {
			wg.Go(func() {
				for seq := from; seq <= to; seq++ {
					for _, ch := range channels {
						v.mark(t, ch, u, receiptsv1.Kind_DELIVERED, seq)
						v.mark(t, ch, u, receiptsv1.Kind_READ, seq-1)
					}
				}
			})
		}
		wg.Wait()
	}
	write([]string{"ann", "ben", "cat", "dan"}, 2, 40)
	require.Eventually(t, func() bool { return viaGRPC.equals(v.snapshot()) }, 20*time.Second, 10*time.Millisecond, "gRPC watcher on A")
	require.Eventually(t, func() bool { return viaSSE.equals(v.snapshot()) }, 20*time.Second, 10*time.Millisecond, "SSE watcher on B")
	for _, f := range []*folded{&viaGRPC, &viaSSE} {
		require.Empty(t, f.dup, "one update per key per event")
		require.Equal(t, 1, f.snaps, "one snapshot: the opening one")
		// 4 users × 2 kinds × 2 channels × 39 entries = 624 entries,
		// coalesced into far fewer updates.
		require.Less(t, f.events, 624)
	}

	// The SSE watcher goes away; changes go on, some to users it never saw.
	sseCancel()
	require.Error(t, <-sseDone, "the client went away")
	token := viaSSE.token
	write([]string{"ann", "eve"}, 41, 60)
	var resumed folded
	resumed.highest = map[string]int64{}
	for k, s := range viaSSE.highest {
		resumed.highest[k] = s
	}
	resumeDone := watchSSE(t, ctx, tb.h1, urlA, channels, token, &resumed) // on the other replica
	require.Eventually(t, func() bool { return resumed.equals(v.snapshot()) }, 20*time.Second, 10*time.Millisecond, "resumed watcher")
	require.Zero(t, resumed.snaps, "a fresh token resumes with updates, not a snapshot")
	require.Empty(t, resumed.dup)
	require.Eventually(t, func() bool { return viaGRPC.equals(v.snapshot()) }, 20*time.Second, 10*time.Millisecond)

	// Shutting replica A down ends its streams (gRPC: Unavailable, resume
	// elsewhere; SSE: an error event) and drains cleanly: stopA requires
	// Serve to return nil, which it would not if the streams held the
	// drain past ShutdownTimeout.
	stopA()
	apierrtest.Refused(t, <-grpcDone, connect.CodeUnavailable, apierr.Unavailable)
	require.ErrorContains(t, <-resumeDone, "error event, reason UNAVAILABLE")
}

func TestWatchRefusals(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()

	// Without a hub the route and the RPC say so.
	status, body := tb.do(t, http.MethodGet, "/v1/channels:watch?channel_id=a", "")
	apierrtest.RefusedREST(t, status, body, http.StatusNotImplemented, apierr.NotEnabled)

	base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	get := func(query string, header http.Header) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, base+"/v1/channels:watch?"+query, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := tb.h1.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}
	code, b := get("resume_token=garbage&channel_id=a", nil)
	apierrtest.RefusedREST(t, code, b, http.StatusBadRequest, apierr.InvalidField)
	require.Contains(t, parseRESTError(t, b).Message, "resume token")
	require.Equal(t, "resume_token", apierr.InfoOfREST(b).GetMetadata()["field"])
	code, b = get("channel_id=a", http.Header{"Last-Event-ID": {"AAAA"}})
	apierrtest.RefusedREST(t, code, b, http.StatusBadRequest, apierr.InvalidField, "Last-Event-ID is the token too")
	code, b = get("", nil)
	apierrtest.RefusedREST(t, code, b, http.StatusBadRequest, apierr.EmptyRequest)
	code, b = get("channel_id=a%7Bb", nil)
	apierrtest.RefusedREST(t, code, b, http.StatusBadRequest, apierr.InvalidID)
	require.Contains(t, parseRESTError(t, b).Message, "channel_id[0]")

	// Over Connect and gRPC, the refusal names the request: the caller's
	// X-Request-Id in a RequestInfo beside the ErrorInfo.
	for _, proto := range []struct {
		name string
		opts []connect.ClientOption
	}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}} {
		client := receiptsv1connect.NewReceiptServiceClient(tb.h2c, base, proto.opts...)
		stream, err := client.WatchChannels(ctx, connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"a"}, ResumeToken: "nope"}))
		require.NoError(t, err)
		require.False(t, stream.Receive())
		apierrtest.Refused(t, stream.Err(), connect.CodeInvalidArgument, apierr.InvalidField, proto.name)
		require.Nil(t, apierr.RequestInfoOf(stream.Err()), "%s: no request id, no tracing: no RequestInfo", proto.name)

		req := connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"a{b"}})
		req.Header().Set(apierr.RequestIDHeader, "watch-"+proto.name)
		stream, err = client.WatchChannels(ctx, req)
		require.NoError(t, err)
		require.False(t, stream.Receive())
		apierrtest.Refused(t, stream.Err(), connect.CodeInvalidArgument, apierr.InvalidID, proto.name)
		require.Equal(t, "watch-"+proto.name, apierr.RequestInfoOf(stream.Err()).GetRequestId(), "%s: %v", proto.name, stream.Err())
		require.NoError(t, stream.Close())
	}
}

// TestWatchThroughMarks: marks made through the gateway reach a watcher
// through the channel view, and a private read never does (a later public
// read is the fence: once it is seen, the private one would have been).
func TestWatchThroughMarks(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range []string{"alice", "bob"} {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/lobby/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
	}
	var f folded
	done := watchSSE(t, ctx, tb.h1, base, []string{"lobby"}, "", &f)
	mark := func(user, body string) {
		status, b := tb.do(t, http.MethodPost, "/v1/users/"+user+"/channels/lobby/read", body)
		require.Equal(t, http.StatusOK, status, "body: %s", b)
	}
	mark("alice", `{"seq": 3}`)
	mark("alice", `{"seq": 10, "private": true}`)
	mark("bob", `{"seq": 4}`)
	// Reading implies delivery: each read shows as both kinds.
	want := map[string]int64{"lobby/alice/READ": 3, "lobby/alice/DELIVERED": 3, "lobby/bob/READ": 4, "lobby/bob/DELIVERED": 4}
	require.Eventually(t, func() bool { return f.equals(want) }, 20*time.Second, 10*time.Millisecond, "never a private read")
	cancel()
	require.Error(t, <-done, "the client went away")
}
