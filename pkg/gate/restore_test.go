package gate_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/redistest"
)

// forget deletes every key of the test's prefix: Redis restarted empty
// (its FLUSHALL; other tests share the server).
func (tb *testBundle) forget(t *testing.T) {
	t.Helper()
	keys := tb.redisKeys(t)
	require.NotEmpty(t, keys)
	require.NoError(t, tb.rdb.Del(context.Background(), keys...).Err())
}

func (tb *testBundle) markRead(t *testing.T, user, ch string, seq int64) *receiptsv1.ReceiptResult {
	t.Helper()
	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/"+user+"/channels/"+ch+"/read", `{"seq": `+strconv.FormatInt(seq, 10)+`}`, &mr)
	return mr.GetResult()
}

// The scenario: mark 900, Redis restarted empty, mark 400. The
// mark 900 is still between Kafka and Postgres (the persister is not
// running), so the second mark waits for it: once the persister has
// written it, the answer is 900 and not advanced, and neither ticks nor
// read-by ever show the cursor below 900.
func TestMarkAfterRedisLossWaitsForWhatIsInFlight(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{restoreTimeout: 30 * time.Second})
	// The first restore writes the incarnation marker, its fence taken
	// while the topic is empty (no persister runs yet).
	require.True(t, tb.markRead(t, "first", "x", 1).GetAdvanced())
	for _, u := range []string{"alice", "bob"} {
		tb.ok(t, http.MethodPut, "/v1/channels/c/members/"+u, `{}`)
	}
	tb.ok(t, http.MethodPost, "/v1/channels/c/messages", `{"seq": 1000, "message_id": "m1000", "sender_id": "bob"}`)
	r := tb.markRead(t, "alice", "c", 900)
	require.True(t, r.GetAdvanced())
	require.EqualValues(t, 900, r.GetState().GetRead().GetPosition().GetSeq())

	tb.forget(t)
	done := make(chan *receiptsv1.ReceiptResult, 1)
	go func() { done <- tb.markRead(t, "alice", "c", 400) }()
	// The restore waits: Postgres lacks what was acknowledged (its wait is
	// observed while nothing has been written).
	require.Eventually(t, func() bool {
		return tb.metric(t, "receipts_kafkagate_redis_losses_total", "loss", "missing") == 2
	}, 10*time.Second, 5*time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("the mark after the loss was answered before the persister wrote what was in flight: %v", r)
	default:
	}

	startPersister(t, tb)
	r = <-done
	require.False(t, r.GetAdvanced(), "a mark below the acknowledged position does not advance")
	require.False(t, r.GetRealtimeDegraded())
	require.EqualValues(t, 900, r.GetState().GetRead().GetPosition().GetSeq(), "the answer is never below the acknowledged read")

	var ticks receiptsv1.ChannelTicks
	tb.doProto(t, http.MethodGet, "/v1/channels/c/ticks", "", &ticks)
	for _, m := range ticks.GetMembers() {
		if m.GetUserId() == "alice" {
			require.EqualValues(t, 900, m.GetRead().GetSeq(), "ticks show alice's read at 900")
		}
	}
	var rec receiptsv1.MessageReceipts
	tb.doProto(t, http.MethodGet, "/v1/channels/c/messages/900/receipts", "", &rec)
	var readers []string
	for _, m := range rec.GetReadBy() {
		readers = append(readers, m.GetUserId())
	}
	require.Contains(t, readers, "alice", "read-by of 900 lists alice")
	require.Equal(t, 2.0, tb.metric(t, "receipts_kafkagate_redis_losses_total", "loss", "missing"), "the first marker, and the loss")
}

// With the persister stopped for good, a mark after a loss is not kept
// waiting past the restore bound: it is made durable and answered
// realtime_degraded, with no state (never one below the durable path's).
func TestMarkAfterRedisLossDegradesWhenThePersisterIsAway(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{restoreTimeout: 300 * time.Millisecond})
	require.True(t, tb.markRead(t, "dan", "c", 900).GetAdvanced())
	tb.forget(t)
	r := tb.markRead(t, "dan", "c", 400)
	require.True(t, r.GetRealtimeDegraded())
	require.Nil(t, r.GetState())
	require.Equal(t, receiptsv1.Durability_KAFKA, r.GetDurability())
	// A read answers Unavailable rather than a value that may be behind.
	status, _ := tb.do(t, http.MethodGet, "/v1/users/dan/read-state", "")
	require.Equal(t, http.StatusServiceUnavailable, status)
}

// A user new to the service costs a restore that finds nothing in
// Postgres and waits for nothing: the marker says Redis lost nothing
// since it was written.
func TestNewUserRestoreWaitsForNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{restoreTimeout: 30 * time.Second})
	// The first write finds no marker (a new Redis): nothing produced yet,
	// so its fence is passed at once.
	require.True(t, tb.markRead(t, "erin", "c", 5).GetAdvanced())
	// Records are on the topic now and no persister runs: a new user
	// must still not wait for them.
	r := tb.markRead(t, "fay", "c", 7)
	require.True(t, r.GetAdvanced())
	require.Equal(t, 2.0, tb.metric(t, "receipts_kafkagate_restores_total", "kind", "cursors", "outcome", "ok"))
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_redis_losses_total", "loss", "missing"))
}

// With replica acks asked for and the replica hung, a mark and a
// mark-unread are still made durable but answered realtime_degraded,
// counted as Redis failures (op replicate). While the replica cannot take
// the user's unload either, reads answer from Postgres once it holds the
// mark; once it can, the user is restored before Redis answers of them
// again, as after any degraded write. With the replica there, or without
// the setting, nothing degrades.
func TestUnreplicatedWritesAnswerDegraded(t *testing.T) {
	t.Parallel()
	master, replica := redistest.StartWithReplica(t)
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	// A healthy replica's ack must not miss the bound on a loaded machine.
	tb := setup(t, setupOpts{redis: rdb, restoreTimeout: 30 * time.Second, config: func(c *testConfig) {
		c.ReplicaAcks, c.ReplicaAckTimeout, c.RedisTimeout = 1, time.Second, 3*time.Second
	}})
	startPersister(t, tb)
	require.False(t, tb.markRead(t, "gus", "c", 5).GetRealtimeDegraded(), "the replica took it")
	replica.Pause(t)
	r := tb.markRead(t, "gus", "c", 9)
	restored := tb.metric(t, "receipts_kafkagate_restores_total", "kind", "cursors", "outcome", "ok")
	require.True(t, r.GetRealtimeDegraded(), "no replica took the mark")
	require.Equal(t, receiptsv1.Durability_KAFKA, r.GetDurability(), "still durable")
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_redis_degraded_total", "op", "replicate"))

	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/gus/read-state", "", &rs)
	require.Len(t, rs.GetChannels(), 1)
	require.EqualValues(t, 9, rs.GetChannels()[0].GetRead().GetPosition().GetSeq(), "from Postgres, past the mark")
	require.Equal(t, restored, tb.metric(t, "receipts_kafkagate_restores_total", "kind", "cursors", "outcome", "ok"),
		"nothing restored while the replica cannot take the unload")
	require.Equal(t, 2.0, tb.metric(t, "receipts_kafkagate_redis_degraded_total", "op", "replicate"), "the unload's wait counts too")

	replica.Resume(t)
	tb.doProto(t, http.MethodGet, "/v1/users/gus/read-state", "", &rs)
	require.Len(t, rs.GetChannels(), 1)
	require.EqualValues(t, 9, rs.GetChannels()[0].GetRead().GetPosition().GetSeq())
	require.Equal(t, restored+1, tb.metric(t, "receipts_kafkagate_restores_total", "kind", "cursors", "outcome", "ok"),
		"the read restored the user first")

	replica.Pause(t)
	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/gus/channels/c/unread", `{"seq": 3}`, &mr)
	require.True(t, mr.GetResult().GetRealtimeDegraded(), "no replica took the mark-unread")
	require.Equal(t, 3.0, tb.metric(t, "receipts_kafkagate_redis_degraded_total", "op", "replicate"))

	plain := setup(t, setupOpts{})
	require.False(t, plain.markRead(t, "gus", "c", 9).GetRealtimeDegraded())
	require.Equal(t, 0.0, plain.metric(t, "receipts_kafkagate_redis_degraded_total", "op", "replicate"))
}
