package gate_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/encoding/protojson"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// startPersister runs a persister on tb's topic and schema until the test
// ends.
func startPersister(t *testing.T, tb *testBundle) {
	t.Helper()
	p, err := persister.New(persister.Config{
		Kafka:        kafkaconf.Config{Brokers: tb.broker.Seeds},
		KafkaOpts:    kafkatest.FastClientOpts(tb.broker.Seeds),
		Topic:        tb.broker.Topic,
		DLTTopic:     tb.broker.DLTTopic,
		Group:        tb.broker.Group,
		Postgres:     pgstore.Config{URL: pgtest.URL(), Schema: tb.schema.Name, MaxConns: 4},
		Retry:        backoff.Config{Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond},
		DrainTimeout: 5 * time.Second,
		Logger:       zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "the persister stops cleanly")
		p.Close()
	})
}

// recordKeys reads the test topic's record keys from the start until done
// says so or 15s pass.
func (tb *testBundle) recordKeys(t *testing.T, done func([]string) bool) []string {
	t.Helper()
	cl := tb.broker.Client(t, kgo.ConsumeTopics(tb.broker.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var keys []string
	for !done(keys) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "waiting for records, have %q", keys)
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetching %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { keys = append(keys, string(r.Key)) })
	}
	return keys
}

// Matrix-style ids (':', '@', '!', '%', '/' inside) travel the whole way:
// marked over REST (percent-encoded path, the fast codec), gRPC and
// Connect; merged in Redis; keyed on the topic with ':' and '%' escaped;
// written to Postgres by the persister; read back from Postgres and
// Redis; streamed to a watcher; and erased with a bare ':' in the path.
func TestMatrixIDsEndToEnd(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	// Every call goes to a replica with a watch hub (setup's gate has none).
	tb.url, _ = replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	startPersister(t, tb)
	const (
		alice = "@alice:example.org"
		bob   = "urn:tenant:bob%1"
		carol = "tenant:x/y#1"
		room  = "!room:example.org"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Members, so that the channel's view shows their moves; a bare ':'
	// in the last path segment is the id's, not a custom verb.
	for _, path := range []string{"/v1/channels/%21room%3Aexample.org/members/%40alice%3Aexample.org",
		"/v1/channels/!room:example.org/members/urn:tenant:bob%251", "/v1/channels/%21room:example.org/members/tenant:x%2Fy%231"} {
		code, body := tb.do(t, http.MethodPut, path, `{}`)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	}
	members, err := tb.client().GetChannel(ctx, connect.NewRequest(&receiptsv1.GetChannelRequest{ChannelId: room}))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{alice, bob, carol}, members.Msg.GetMembers())

	stream, err := tb.client().WatchChannels(ctx, connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{room}}))
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		events  int
		updates []*receiptsv1.CursorUpdate
	)
	go func() {
		for stream.Receive() {
			mu.Lock()
			events++
			updates = append(updates, stream.Msg().GetUpdates()...)
			mu.Unlock()
		}
	}()
	saw := func(user string, kind receiptsv1.Kind, seq int64, removed bool) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, u := range updates {
				if u.GetChannelId() == room && u.GetUserId() == user && u.GetKind() == kind &&
					u.GetRemoved() == removed && (removed || u.GetPosition().GetSeq() == seq) {
					return true
				}
			}
			return false
		}
	}
	// The stream opens with a snapshot: marks made after it are updates.
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return events > 0 }, 10*time.Second, 5*time.Millisecond)

	var mark receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/%40alice%3Aexample.org/channels/%21room%3Aexample.org/read",
		`{"seq": 5, "message_id": "$ev5:example.org", "device_id": "dev:1"}`, &mark)
	require.True(t, mark.GetResult().GetAdvanced())
	tb.doProto(t, http.MethodPost, "/v1/users/tenant%3Ax%2Fy%231/channels/%21room%3Aexample.org/delivered", `{"seq": 4}`, &mark)
	require.True(t, mark.GetResult().GetAdvanced(), "an id holding '/' is one path segment")
	_, err = tb.client(connect.WithGRPC()).MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: bob, ChannelId: room, Seq: 3, MessageId: "%m3"}))
	require.NoError(t, err)
	_, err = tb.client().MarkReceipts(ctx, connect.NewRequest(&receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{
		{UserId: alice, ChannelId: room, Kind: receiptsv1.Kind_DELIVERED, Seq: 6, MessageId: "$ev6:example.org"},
	}}))
	require.NoError(t, err)

	// The topic (a join and the marks): one unescaped ':' between the
	// escaped ids.
	keys := tb.recordKeys(t, func(k []string) bool { return len(k) >= 7 })
	const aliceKey, bobKey, carolKey = "@alice%3Aexample.org:!room%3Aexample.org", "urn%3Atenant%3Abob%251:!room%3Aexample.org", "tenant%3Ax/y#1:!room%3Aexample.org"
	require.ElementsMatch(t, []string{aliceKey, aliceKey, aliceKey, bobKey, bobKey, carolKey, carolKey}, keys)

	// Postgres, through the persister.
	want := map[receipt.Key][2]int64{{User: alice, Channel: room}: {5, 6}, {User: bob, Channel: room}: {3, 3}, {User: carol, Channel: room}: {0, 4}}
	require.Eventually(t, func() bool {
		rows, err := cursors.NewPostgres(tb.schema.Store).GetKeys(ctx, []receipt.Key{{User: alice, Channel: room}, {User: bob, Channel: room}, {User: carol, Channel: room}})
		if err != nil || len(rows) != len(want) {
			return false
		}
		for _, r := range rows {
			if want[r.Key] != [2]int64{r.Read.Position.Seq, r.Delivered.Position.Seq} {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "the persister writes every key")

	// Reads: alice's from Postgres (her Redis hash dropped), over REST
	// through vanguard; carol's from Redis over gRPC.
	require.NoError(t, tb.rdb.Del(ctx, cursors.NewStore(tb.store).RedisKey(alice)).Err())
	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/%40alice%3Aexample.org/read-state?channel_id=%21room%3Aexample.org", "", &rs)
	require.Equal(t, alice, rs.GetUserId())
	require.Len(t, rs.GetChannels(), 1)
	require.Equal(t, room, rs.GetChannels()[0].GetChannelId())
	require.Equal(t, int64(5), rs.GetChannels()[0].GetRead().GetPosition().GetSeq())
	require.Equal(t, "$ev5:example.org", rs.GetChannels()[0].GetRead().GetMessageId())
	require.Equal(t, int64(6), rs.GetChannels()[0].GetDelivered().GetPosition().GetSeq())
	tb.doProto(t, http.MethodGet, "/v1/users/tenant%3Ax%2Fy%231/read-state", "", &rs)
	require.Equal(t, carol, rs.GetUserId(), "an id holding '/' is one path segment for vanguard too")
	got, err := tb.client(connect.WithGRPC()).GetReadState(ctx, connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: carol}))
	require.NoError(t, err)
	require.Len(t, got.Msg.GetChannels(), 1)
	require.Equal(t, int64(4), got.Msg.GetChannels()[0].GetDelivered().GetPosition().GetSeq())

	// The watcher saw the public moves, ids whole.
	require.Eventually(t, saw(alice, receiptsv1.Kind_READ, 5, false), 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, saw(carol, receiptsv1.Kind_DELIVERED, 4, false), 10*time.Second, 5*time.Millisecond)

	// A watcher that starts now gets the members' cursors in its snapshot,
	// parsed out of the view's "kind:user" fields.
	late, err := tb.client().WatchChannels(ctx, connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{room}}))
	require.NoError(t, err)
	require.True(t, late.Receive(), "%v", late.Err())
	snap := map[string]int64{}
	for _, ticks := range late.Msg().GetSnapshot() {
		for _, m := range ticks.GetMembers() {
			snap[m.GetUserId()] = m.GetRead().GetSeq()*100 + m.GetDelivered().GetSeq()
		}
	}
	require.Equal(t, map[string]int64{alice: 506, bob: 303, carol: 4}, snap)
	require.NoError(t, late.Close())

	// Erasure, with the id's ':' bare in the last path segment (where a
	// REST route's custom verb would go).
	code, body := tb.do(t, http.MethodDelete, "/v1/users/@alice:example.org", "")
	require.Equal(t, http.StatusOK, code, "body: %s", body)
	var erased receiptsv1.EraseUserResponse
	require.NoError(t, protojson.Unmarshal(body, &erased))
	require.Equal(t, alice, erased.GetUserId())
	states, complete, err := cursors.NewStore(tb.store).Get(ctx, alice, nil)
	require.NoError(t, err)
	require.Empty(t, states)
	require.True(t, complete)
	require.Eventually(t, saw(alice, receiptsv1.Kind_READ, 0, true), 10*time.Second, 5*time.Millisecond, "the watcher is told")
	require.Eventually(t, func() bool {
		n, err := cursors.NewPostgres(tb.schema.Store).Get(ctx, alice, nil)
		return err == nil && len(n) == 0
	}, 20*time.Second, 10*time.Millisecond, "Postgres holds nothing of alice")
	keys = tb.recordKeys(t, func(k []string) bool { return len(k) >= 8 })
	require.Contains(t, keys, "u::@alice%3Aexample.org")
	others, err := cursors.NewPostgres(tb.schema.Store).GetKeys(ctx, []receipt.Key{{User: bob, Channel: room}, {User: carol, Channel: room}})
	require.NoError(t, err)
	require.Len(t, others, 2, "the other users' rows stay")
}
