package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/gate/server"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/receipt"
)

// withSpool enables a spool in a fresh directory with the given bound.
func withSpool(t *testing.T, after time.Duration, more ...func(*testConfig)) setupOpts {
	dir := t.TempDir()
	return setupOpts{config: func(c *testConfig) {
		c.Durable.SpoolDir = dir
		c.Durable.SpoolAfter = after
		c.Durable.ProduceTimeout = time.Second
		for _, f := range more {
			f(c)
		}
	}}
}

// failProduce makes every produce to the topic fail with a retriable error
// (kgo retries it until the delivery timeout). It returns the undo.
func failProduce(t *testing.T, tb *testBundle) func() {
	t.Helper()
	f := tb.broker.Cluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: tb.broker.Topic, Err: kerr.NotLeaderForPartition, Count: -1,
	})
	var once sync.Once
	undo := func() { once.Do(f.Remove) }
	t.Cleanup(undo)
	return undo
}

// holdProduce makes the broker hold every produce request, unanswered,
// until the undo: Kafka is up but never acks.
func holdProduce(t *testing.T, tb *testBundle) func() {
	t.Helper()
	c := tb.broker.Cluster
	release := make(chan struct{})
	var once sync.Once
	undo := func() { once.Do(func() { close(release) }) }
	t.Cleanup(undo)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	return undo
}

// seqsOf lists the read seqs of key in topic order.
func seqsOf(states []receipt.State, key string) []int64 {
	var out []int64
	for _, s := range states {
		if s.Key.KafkaKey() == key {
			out = append(out, s.Read.Position.Seq)
		}
	}
	return out
}

// firstSeen keeps the first occurrence of each value: a batch the replayer
// sends again (its first try timed out but landed) repeats records, and
// what must be in spool order is where each record first lands.
func firstSeen(seqs []int64) []int64 {
	var out []int64
	for _, s := range seqs {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// hasAll reports whether seqs holds every one of want.
func hasAll(seqs []int64, want ...int64) bool {
	for _, w := range want {
		if !slices.Contains(seqs, w) {
			return false
		}
	}
	return true
}

func TestKafkaDownSpoolsAndReplaysInOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		after  time.Duration
		inject func(*testing.T, *testBundle) func()
		// waitReplayFailure: Kafka comes back only after the replayer
		// failed a try (each lasts ProduceTimeout) and backs off.
		produceTimeout    time.Duration
		waitReplayFailure bool
	}{
		{"produce fails", 500 * time.Millisecond, failProduce, time.Second, true},
		// The default bounds, and Kafka back while the replayer's first
		// try is still waiting.
		{"produce held", producer.SpoolAfterDefault, holdProduce, producer.ProduceTimeoutDefault, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, withSpool(t, c.after, func(cfg *testConfig) { cfg.Durable.ProduceTimeout = c.produceTimeout }))
			ctx := context.Background()
			undo := c.inject(t, tb)

			// The first call waits out the bound, then spools (the bound's
			// exact length: pkg/producer's synctest tests).
			var resp receiptsv1.MarkReceiptsResponse
			tb.doProto(t, http.MethodPost, "/v1/receipts:mark", markBody(
				`{"user_id": "kim", "channel_id": "c1", "kind": "READ", "seq": 1}`,
				`{"user_id": "kim", "channel_id": "c2", "kind": "READ", "seq": 1}`,
			), &resp)
			require.Len(t, resp.GetResults(), 2)
			for _, r := range resp.GetResults() {
				require.Equal(t, receiptsv1.Durability_SPOOLED, r.GetDurability())
				require.False(t, r.GetRealtimeDegraded())
				require.Equal(t, int64(1), r.GetState().GetRead().GetPosition().GetSeq())
			}
			require.Equal(t, 1.0, gathered(t, tb.reg, "receipts_kafkagate_spool_circuit_open"))

			// The circuit is open: later calls spool without waiting
			// (TestHeldAcksSpoolAfterTheBoundThenTheCircuitSpoolsAtOnce).
			grpc := tb.client(connect.WithGRPC())
			for seq := int64(2); seq <= 6; seq++ {
				mr, err := grpc.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "kim", ChannelId: "c1", Seq: seq}))
				require.NoError(t, err)
				require.Equal(t, receiptsv1.Durability_SPOOLED, mr.Msg.GetResult().GetDurability())
			}
			require.Equal(t, 7.0, tb.metric(t, "receipts_kafkagate_events_total", "outcome", "spooled"))
			require.Equal(t, 7.0, gathered(t, tb.reg, "receipts_kafkagate_spool_records"))
			require.Greater(t, gathered(t, tb.reg, "receipts_kafkagate_spool_bytes"), 0.0)
			require.NoError(t, tb.server.Ready(ctx), "Kafka is down but the spool has room")

			if c.waitReplayFailure {
				require.Eventually(t, func() bool {
					return gathered(t, tb.reg, "receipts_kafkagate_spool_replay_errors_total") >= 1
				}, 10*time.Second, 20*time.Millisecond)
				require.Equal(t, 7.0, gathered(t, tb.reg, "receipts_kafkagate_spool_records"))
			}

			// Kafka is back: the replayer sends everything, in spool order.
			undo()
			// The replayer commits (records drop to 0) before it counts the
			// batch as replayed: wait for both.
			require.Eventually(t, func() bool {
				return gathered(t, tb.reg, "receipts_kafkagate_spool_records") == 0 &&
					gathered(t, tb.reg, "receipts_kafkagate_spool_replayed_total") >= 7
			}, 20*time.Second, 20*time.Millisecond, "spool not replayed")
			require.Equal(t, 0.0, gathered(t, tb.reg, "receipts_kafkagate_spool_circuit_open"))
			require.Equal(t, 0.0, gathered(t, tb.reg, "receipts_kafkagate_spool_bytes"), "a drained spool gives its files back")
			_, states := tb.consumeUntil(t, func(_ []*kgo.Record, states []receipt.State) bool {
				return hasAll(seqsOf(states, "kim:c1"), 1, 2, 3, 4, 5, 6) && hasAll(seqsOf(states, "kim:c2"), 1)
			})
			require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, firstSeen(seqsOf(states, "kim:c1")))

			// And calls produce to Kafka first again.
			var mr receiptsv1.MarkResponse
			tb.doProto(t, http.MethodPost, "/v1/users/kim/channels/c1/read", `{"seq": 7}`, &mr)
			require.Equal(t, receiptsv1.Durability_KAFKA, mr.GetResult().GetDurability())
			require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_events_total", "outcome", "kafka"))
		})
	}
}

// marks builds a MarkReceipts JSON body of n marks for users prefix0..n-1.
func marks(prefix string, n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"user_id": "%s%d", "channel_id": "c", "kind": "READ", "seq": %d}`, prefix, i, i+1)
	}
	return markBody(items...)
}

func TestSpoolFullAnswersUnavailableWithRetryAfter(t *testing.T) {
	t.Parallel()
	// The smallest spool: one record of the largest size, about 4.4 KiB;
	// 120 small marks (~50 bytes each on disk) never fit.
	tb := setup(t, withSpool(t, 300*time.Millisecond, func(c *testConfig) { c.Durable.SpoolMaxBytes = producer.MinSpoolBytes(gate.MaxRecordBytes) }))
	ctx := context.Background()
	undo := failProduce(t, tb)
	usersIn := func(prefix string) int {
		n := 0
		for _, k := range tb.redisKeys(t) {
			if strings.Contains(k, "u:{"+prefix) { // user hashes (not settings)
				n++
			}
		}
		return n
	}
	checkUnavailable := func(resp *http.Response, body []byte, n int) {
		t.Helper()
		apierrtest.RefusedREST(t, resp.StatusCode, body, http.StatusServiceUnavailable, apierr.Unavailable)
		require.Equal(t, "2", resp.Header.Get("Retry-After"))
		e := parseRESTError(t, body)
		require.Equal(t, int(connect.CodeUnavailable), e.Code)
		require.Contains(t, e.Message, fmt.Sprintf("making %d marks durable", n))
		require.Contains(t, e.Message, "spool full; nothing was acknowledged, retry")
	}

	// With the circuit closed, a call tries Kafka first, then the spool:
	// too large for it, it is refused. Redis was merged before the durable
	// step, so it holds these unacknowledged marks; that is harmless (the
	// caller retries; otherwise the drift sweep makes Postgres agree).
	resp, body := tb.doResp(t, http.MethodPost, "/v1/receipts:mark", marks("big", 120))
	checkUnavailable(resp, body, 120)
	require.Equal(t, 120, usersIn("big"))
	require.Equal(t, 0.0, gathered(t, tb.reg, "receipts_kafkagate_spool_circuit_open"), "an empty spool keeps the circuit closed")

	// A call that fits is spooled and opens the circuit.
	var mr receiptsv1.MarkReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", marks("fits", 20), &mr)
	require.Equal(t, receiptsv1.Durability_SPOOLED, mr.GetResults()[19].GetDurability())
	require.Equal(t, 1.0, gathered(t, tb.reg, "receipts_kafkagate_spool_circuit_open"))

	// Now calls that do not fit are refused at once, before Redis: REST
	// gets 503 with Retry-After, gRPC and Connect Unavailable with it
	// (without waiting for Kafka: TestFullSpoolRefusesAtOnce).
	resp, body = tb.doResp(t, http.MethodPost, "/v1/receipts:mark", marks("refused", 120))
	checkUnavailable(resp, body, 120)
	req := &receiptsv1.MarkReceiptsRequest{}
	for i := range 120 {
		req.Receipts = append(req.Receipts, &receiptsv1.Receipt{UserId: fmt.Sprintf("rpc%d", i), ChannelId: "c", Kind: receiptsv1.Kind_DELIVERED, Seq: 1})
	}
	for name, opts := range map[string][]connect.ClientOption{"grpc": {connect.WithGRPC()}, "connect": nil} {
		_, err := tb.client(opts...).MarkReceipts(ctx, connect.NewRequest(req))
		apierrtest.Refused(t, err, connect.CodeUnavailable, apierr.Unavailable, name)
		ce, ok := err.(*connect.Error)
		require.True(t, ok, name)
		require.Equal(t, "2", ce.Meta().Get("Retry-After"), name)
		require.Contains(t, ce.Message(), "spool full", name)
	}
	require.Zero(t, usersIn("refused"))
	require.Zero(t, usersIn("rpc"))
	require.Equal(t, 20.0, gathered(t, tb.reg, "receipts_kafkagate_spool_records"), "nothing of a refused call is spooled")
	require.Equal(t, 4.0, gathered(t, tb.reg, "receipts_kafkagate_spool_full_total"))
	require.Equal(t, 20.0, tb.metric(t, "receipts_kafkagate_events_total", "outcome", "spooled"))
	require.Equal(t, 480.0, tb.metric(t, "receipts_kafkagate_events_total", "outcome", "unavailable"))
	require.Equal(t, 4.0, tb.metric(t, "receipts_kafkagate_requests_total", "rpc", "MarkReceipts", "code", "unavailable"))

	// Kafka back: the spooled marks reach the topic, and calls go through.
	undo()
	_, states := tb.consumeUntil(t, func(_ []*kgo.Record, states []receipt.State) bool {
		n := 0
		for i := range 20 {
			if len(seqsOf(states, fmt.Sprintf("fits%d:c", i))) > 0 {
				n++
			}
		}
		return n == 20
	})
	require.Empty(t, seqsOf(states, "refused0:c"))
	require.Eventually(t, func() bool {
		return gathered(t, tb.reg, "receipts_kafkagate_spool_circuit_open") == 0
	}, 10*time.Second, 20*time.Millisecond)
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", marks("later", 120), &mr)
	require.Equal(t, receiptsv1.Durability_KAFKA, mr.GetResults()[0].GetDurability())
}

func TestRestartReplaysPendingSpool(t *testing.T) {
	t.Parallel()
	tb := setup(t, withSpool(t, 300*time.Millisecond))
	undo := failProduce(t, tb)
	for seq := 1; seq <= 3; seq++ {
		var mr receiptsv1.MarkResponse
		tb.doProto(t, http.MethodPost, "/v1/users/lee/channels/c1/read", fmt.Sprintf(`{"seq": %d}`, seq), &mr)
		require.Equal(t, receiptsv1.Durability_SPOOLED, mr.GetResult().GetDurability())
	}
	// Stop the gate with the records pending, then tear the spool's tail
	// as a crash inside an append would (bytes never acknowledged).
	tb.stop()
	segs, err := filepath.Glob(filepath.Join(tb.cfg.Durable.SpoolDir, "*.seg"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{40, 0, 0, 0, 1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	undo()

	// A new gate on the same directory replays them at start.
	core, logs := observer.New(zap.InfoLevel)
	cfg := tb.cfg
	cfg.Durable.Logger = zap.New(core)
	reg := prometheus.NewRegistry()
	cfg.Registerer, cfg.Server.Registerer, cfg.Durable.Registerer = reg, reg, reg
	startGate(t, cfg)

	opened := logs.FilterMessageSnippet("spool opened").All()
	require.Len(t, opened, 1)
	fields := opened[0].ContextMap()
	require.Equal(t, int64(3), fields["pending_records"])
	require.Equal(t, int64(7), fields["discarded_bytes"])
	require.Equal(t, "spool opened; recovered from a crash", opened[0].Message)

	_, states := tb.consumeUntil(t, func(_ []*kgo.Record, states []receipt.State) bool {
		return hasAll(seqsOf(states, "lee:c1"), 1, 2, 3)
	})
	require.Equal(t, []int64{1, 2, 3}, firstSeen(seqsOf(states, "lee:c1")))
	// The replayer counts a batch after its commit empties the spool: wait
	// for both.
	require.Eventually(t, func() bool {
		return gathered(t, reg, "receipts_kafkagate_spool_records") == 0 &&
			gathered(t, reg, "receipts_kafkagate_spool_replayed_total") == 3
	}, 10*time.Second, 20*time.Millisecond)
}

func TestReadinessAndDegradedWhenKafkaAndRedisAreDown(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = down.Close() })
	noKafka := func(c *testConfig) {
		addr := closedAddr(t)
		c.Durable.Kafka = kafkaconf.Config{Brokers: []string{addr}}
		c.Durable.KafkaOpts = []kgo.Opt{kgo.SeedBrokers(addr), kgo.MetadataMinAge(50 * time.Millisecond)}
	}
	ready := func(s *server.Server) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return s.Ready(ctx)
	}

	t.Run("no spool", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOpts{redis: down, config: noKafka})
		err := ready(tb.server)
		require.ErrorContains(t, err, "kafka:")
		require.ErrorContains(t, err, "spool: not configured")
		require.ErrorContains(t, err, "redis:", "names everything that is down")
	})

	t.Run("spool", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, withSpool(t, 300*time.Millisecond, noKafka, func(c *testConfig) {
			c.Redis = down
			c.Durable.SpoolMaxBytes = 16 << 10
		}))
		require.NoError(t, ready(tb.server), "the spool can take writes")

		// Still durable (spooled), and the answer says Redis is degraded.
		var resp receiptsv1.MarkReceiptsResponse
		tb.doProto(t, http.MethodPost, "/v1/receipts:mark", marks("mia", 2), &resp)
		for _, r := range resp.GetResults() {
			require.Equal(t, receiptsv1.Durability_SPOOLED, r.GetDurability())
			require.True(t, r.GetRealtimeDegraded())
		}
		// Fill the spool past half: no room for a typical call.
		for gathered(t, tb.reg, "receipts_kafkagate_spool_bytes") < 9<<10 {
			tb.doProto(t, http.MethodPost, "/v1/receipts:mark", marks("fill", 40), &resp)
			require.Equal(t, receiptsv1.Durability_SPOOLED, resp.GetResults()[0].GetDurability())
		}
		err := ready(tb.server)
		require.ErrorContains(t, err, "kafka:")
		require.ErrorContains(t, err, "spool: ")
		require.ErrorContains(t, err, "spool full")
	})
}

func TestCallerDeadlineShorterThanBoundStillSpools(t *testing.T) {
	t.Parallel()
	tb := setup(t, withSpool(t, producer.SpoolAfterDefault, func(c *testConfig) { c.Durable.ProduceTimeout = producer.ProduceTimeoutDefault }))
	failProduce(t, tb)

	// The caller gives the call 1.5s, less than the 2s bound: the gate
	// waits for Kafka only as long as leaves time to spool, so the call
	// succeeds within the caller's deadline (the exact wait:
	// TestCallerDeadlineShorterThanTheBoundStillSpools).
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	mr, err := tb.client(connect.WithGRPC()).MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "ned", ChannelId: "c1", Seq: 1}))
	require.NoError(t, err)
	require.Equal(t, receiptsv1.Durability_SPOOLED, mr.Msg.GetResult().GetDurability())
	require.Equal(t, 1.0, gathered(t, tb.reg, "receipts_kafkagate_spool_records"))
	// A wait cut short by the caller says nothing about Kafka.
	require.Equal(t, 0.0, gathered(t, tb.reg, "receipts_kafkagate_spool_circuit_open"))
}
