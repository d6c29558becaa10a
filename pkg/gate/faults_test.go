package gate_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/cursors"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

func TestRedisDownStillDurable(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = down.Close() })
	tb := setup(t, setupOpts{redis: down})
	ctx := context.Background()

	var resp receiptsv1.MarkReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", markBody(
		`{"user_id": "gina", "channel_id": "c1", "kind": "READ", "seq": 4}`,
		`{"user_id": "gina", "channel_id": "c2", "kind": "DELIVERED", "seq": 2}`,
	), &resp)
	require.Len(t, resp.GetResults(), 2)
	for _, r := range resp.GetResults() {
		require.True(t, r.GetRealtimeDegraded())
		require.Equal(t, receiptsv1.Durability_KAFKA, r.GetDurability())
		require.Nil(t, r.GetState(), "no real-time state to report")
	}
	_, states := tb.consume(t, 2)
	require.ElementsMatch(t, []string{"gina:c1", "gina:c2"}, []string{states[0].Key.KafkaKey(), states[1].Key.KafkaKey()})
	require.Equal(t, 2.0, tb.metric(t, "receipts_kafkagate_redis_degraded_total", "op", "merge"))

	// Reads fall back to Postgres alone.
	_, err := cursors.NewPostgres(tb.schema.Store).Upsert(ctx, []receipt.State{
		{Key: receipt.Key{User: "gina", Channel: "c1"}, Read: receipt.Cursor{Position: pos(4)}, Delivered: receipt.Cursor{Position: pos(4)}, UpdatedAtUnixMs: 1},
	})
	require.NoError(t, err)
	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/gina/read-state?channel_id=c1", "", &rs)
	require.Len(t, rs.GetChannels(), 1)
	require.Equal(t, int64(4), rs.GetChannels()[0].GetRead().GetPosition().GetSeq())
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_read_fallbacks_total", "reason", "redis_error"))

	// Redis down degrades answers; the gate still takes durable writes.
	require.NoError(t, tb.server.Ready(ctx))
}

func TestKafkaFailingAnswersUnavailable(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Durable.ProduceTimeout = time.Second }})
	ctx := context.Background()

	// Every produce to the topic fails with a retriable error: kgo retries
	// until the delivery timeout.
	fault := tb.broker.Cluster.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: tb.broker.Topic,
		Err:   kerr.NotLeaderForPartition,
		Count: -1,
	})
	resp, body := tb.doResp(t, http.MethodPost, "/v1/users/hank/channels/c1/read", `{"seq": 3}`)
	apierrtest.RefusedREST(t, resp.StatusCode, body, http.StatusServiceUnavailable, apierr.Unavailable)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	require.Equal(t, "2", apierr.InfoOfREST(body).GetMetadata()["retry_after_seconds"])
	e := parseRESTError(t, body)
	require.Equal(t, int(connect.CodeUnavailable), e.Code)
	require.Contains(t, e.Message, "making 1 marks durable")
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_events_total", "outcome", "unavailable"))
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_requests_total", "rpc", "MarkRead", "code", "unavailable"))

	_, err := tb.client(connect.WithGRPC()).MarkDelivered(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "hank", ChannelId: "c1", Seq: 4}))
	apierrtest.Refused(t, err, connect.CodeUnavailable, apierr.Unavailable)
	require.Zero(t, tb.highWatermarks(t))

	// Once Kafka acks again, so does the gate.
	fault.Remove()
	// The first call after the outage succeeds: records kgo fails for an
	// older record's sake are produced again within the bound.
	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/hank/channels/c1/read", `{"seq": 5}`, &mr)
	require.Equal(t, receiptsv1.Durability_KAFKA, mr.GetResult().GetDurability())
	_, states := tb.consume(t, 1)
	require.Equal(t, pos(5), states[len(states)-1].Read.Position)
}

func TestKafkaHoldingAcksAnswersUnavailableWithinBound(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Durable.ProduceTimeout = time.Second }})
	c := tb.broker.Cluster

	// Hold every produce request until the test ends: the broker never
	// answers, which kgo's delivery timeout alone does not bound.
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})

	// The bound's exact length is pkg/producer's
	// TestHeldAcksWithoutSpoolFailWithinProduceTimeout.
	status, body := tb.do(t, http.MethodPost, "/v1/receipts:mark", markBody(
		`{"user_id": "ivy", "channel_id": "c1", "kind": "READ", "seq": 1}`,
		`{"user_id": "ivy", "channel_id": "c2", "kind": "READ", "seq": 1}`,
	))
	apierrtest.RefusedREST(t, status, body, http.StatusServiceUnavailable, apierr.Unavailable)
	require.Contains(t, parseRESTError(t, body).Message, "producing 2 records (attempt 1, 2 not acked): waiting for acks: context deadline exceeded")
	require.Equal(t, 2.0, tb.metric(t, "receipts_kafkagate_events_total", "outcome", "unavailable"))
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_produce_duration_seconds"))
	once.Do(func() { close(release) })
}

func TestPostgresDownWithIncompleteRedisIsUnavailable(t *testing.T) {
	t.Parallel()
	pg, err := pgstore.Open(context.Background(), pgstore.Config{URL: "postgres://postgres@" + closedAddr(t) + "/receipts?sslmode=disable&connect_timeout=1"})
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Postgres = pg }})

	status, body := tb.do(t, http.MethodGet, "/v1/users/jack/read-state", "")
	apierrtest.RefusedREST(t, status, body, http.StatusServiceUnavailable, apierr.Unavailable)
	e := parseRESTError(t, body)
	require.Equal(t, int(connect.CodeUnavailable), e.Code)
	require.True(t, strings.HasPrefix(e.Message, "reading durable state (real-time view incomplete)"), e.Message)
}

// A thread write whose produce failed after Redis took it is retried by
// its client: the retry changes nothing in Redis, and must still be made
// durable, or the acknowledged write never reaches Postgres.
func TestThreadWriteRetriedAfterFailedProduceIsDurable(t *testing.T) {
	t.Parallel()
	tb, cl := retrySetup(t)
	ctx := context.Background()
	for _, u := range []string{"ru1", "ru2"} {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/rc/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	// The channel's messages first: the thread's root must be one.
	tb.ok(t, http.MethodPost, "/v1/channels/rc/messages", `{"seq": 5, "sender_id": "ru1"}`)
	tb.ok(t, http.MethodPost, "/v1/channels/rc/threads/2/messages", `{"seq": 3, "sender_id": "ru1"}`)

	fault := tb.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: tb.broker.Topic, Err: kerr.NotLeaderForPartition, Count: -1})
	read := &receiptsv1.MarkThreadReadRequest{UserId: "ru2", ChannelId: "rc", RootSeq: 2, Seq: 3, Private: true}
	_, err := cl.MarkThreadRead(ctx, connect.NewRequest(read))
	apierrtest.Refused(t, err, connect.CodeUnavailable, apierr.Unavailable)
	fault.Remove()

	res, err := cl.MarkThreadRead(ctx, connect.NewRequest(read))
	require.NoError(t, err)
	require.False(t, res.Msg.GetAdvanced(), "Redis took the first call")
	require.Equal(t, receiptsv1.Durability_KAFKA, res.Msg.GetDurability())
	tb.decodedUntil(t, func(ds []event.Decoded) bool {
		for _, d := range ds {
			if d.Thread != nil && d.Key.User == "ru2" && d.Thread.Cursors.PrivateRead.Position.Seq == 3 {
				return true
			}
		}
		return false
	})
}

// retrySetup is a gateway whose produce gives up within a second, and
// its client.
func retrySetup(t *testing.T) (*testBundle, receiptsv1connect.ReceiptServiceClient) {
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Durable.ProduceTimeout = time.Second }})
	return tb, tb.client()
}

// producedOnRetry fails every produce while first runs (its call must be
// refused Unavailable, after Redis took it), then runs retry and waits
// for a record of the topic that found says holds what first wrote.
func producedOnRetry(t *testing.T, tb *testBundle, first func() error, retry func(), found func(event.Decoded) bool) {
	t.Helper()
	fault := tb.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: tb.broker.Topic, Err: kerr.NotLeaderForPartition, Count: -1})
	apierrtest.Refused(t, first(), connect.CodeUnavailable, apierr.Unavailable)
	fault.Remove()
	retry()
	tb.decodedUntil(t, func(ds []event.Decoded) bool { return slices.ContainsFunc(ds, found) })
}

// A join whose produce failed after Redis took it (the register and the
// read raised to the join point): the retry changes nothing in Redis, so
// it produces the cursors Redis holds, or the join read never reaches
// Postgres and Redis stays ahead of it.
func TestJoinRetriedAfterFailedProduceMakesItsReadDurable(t *testing.T) {
	t.Parallel()
	tb, cl := retrySetup(t)
	ctx := context.Background()
	tb.ok(t, http.MethodPut, "/v1/channels/jc/members/ja", `{}`)
	tb.ok(t, http.MethodPost, "/v1/channels/jc/messages", `{"seq": 8, "sender_id": "ja"}`)
	join := &receiptsv1.JoinChannelRequest{ChannelId: "jc", UserId: "jb", Seq: new(int64(6))}
	producedOnRetry(t, tb, func() error {
		_, err := cl.JoinChannel(ctx, connect.NewRequest(join))
		return err
	}, func() {
		res, err := cl.JoinChannel(ctx, connect.NewRequest(join))
		require.NoError(t, err)
		require.False(t, res.Msg.GetChanged(), "Redis took the first call")
		require.Equal(t, receiptsv1.Durability_KAFKA, res.Msg.GetDurability())
	}, func(d event.Decoded) bool {
		return d.Key == receipt.Key{User: "jb", Channel: "jc"} && d.Membership != nil && d.Receipt != nil && d.Receipt.PrivateRead.Position.Seq == 6
	})
}

// A mark whose produce failed after Redis took it, retried after a
// mark-unread moved the epoch: the retry is stale and changes nothing, so
// what Redis holds of the key goes in its place, or the read Redis took
// never reaches Postgres (the mark-unread's record carries only the
// private read).
func TestStaleRetryAfterFailedProduceMakesRedisDurable(t *testing.T) {
	t.Parallel()
	tb, cl := retrySetup(t)
	ctx := context.Background()
	tb.ok(t, http.MethodPost, "/v1/channels/sc/messages", `{"seq": 10, "sender_id": "sx"}`)
	mark := &receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{
		{UserId: "su", ChannelId: "sc", Kind: receiptsv1.Kind_READ, Seq: 5, Epoch: new(int64(0))},
	}}
	producedOnRetry(t, tb, func() error {
		_, err := cl.MarkReceipts(ctx, connect.NewRequest(mark))
		return err
	}, func() {
		_, err := cl.MarkUnread(ctx, connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: "su", ChannelId: "sc", Seq: 2}))
		require.NoError(t, err)
		res, err := cl.MarkReceipts(ctx, connect.NewRequest(mark))
		require.NoError(t, err)
		require.Equal(t, string(apierr.StaleEpoch), res.Msg.GetResults()[0].GetReason())
		require.Equal(t, receiptsv1.Durability_DURABILITY_UNSPECIFIED, res.Msg.GetResults()[0].GetDurability(), "the stale mark itself was not written")
	}, func(d event.Decoded) bool {
		return d.Key == receipt.Key{User: "su", Channel: "sc"} && d.Receipt != nil && d.Receipt.Read.Position.Seq == 5
	})
}

// The same for a thread read: its stale retry produces the thread
// register Redis holds.
func TestStaleThreadRetryAfterFailedProduceMakesRedisDurable(t *testing.T) {
	t.Parallel()
	tb, cl := retrySetup(t)
	ctx := context.Background()
	tb.ok(t, http.MethodPost, "/v1/channels/stc/messages", `{"seq": 5, "sender_id": "stx"}`)
	tb.ok(t, http.MethodPost, "/v1/channels/stc/threads/2/messages", `{"seq": 4, "sender_id": "stx"}`)
	read := &receiptsv1.MarkThreadReadRequest{UserId: "stu", ChannelId: "stc", RootSeq: 2, Seq: 3, Epoch: new(int64(0))}
	producedOnRetry(t, tb, func() error {
		_, err := cl.MarkThreadRead(ctx, connect.NewRequest(read))
		return err
	}, func() {
		_, err := cl.MarkThreadUnread(ctx, connect.NewRequest(&receiptsv1.MarkThreadUnreadRequest{UserId: "stu", ChannelId: "stc", RootSeq: 2, Seq: 1}))
		require.NoError(t, err)
		res, err := cl.MarkThreadRead(ctx, connect.NewRequest(read))
		require.NoError(t, err)
		require.Equal(t, string(apierr.StaleEpoch), res.Msg.GetReason())
		require.Equal(t, receiptsv1.Durability_DURABILITY_UNSPECIFIED, res.Msg.GetDurability(), "the stale read itself was not written")
	}, func(d event.Decoded) bool {
		return d.Thread != nil && d.Thread.Key.User == "stu" && d.Thread.Cursors.Read.Position.Seq == 3
	})
}
