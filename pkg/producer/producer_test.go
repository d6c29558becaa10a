package producer

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/spool"
)

// The producer's bounds are its behaviour, so these tests run in a
// synctest bubble: a kfake broker on kfake's in-memory network, the
// producer's kgo client dialling it, and a fake clock that advances only
// when every goroutine waits. A bound is then an exact duration, not a
// wall-clock window.

const testTopic = "receipts-test"

// bubble is one test's broker and producer, inside a synctest bubble.
type bubble struct {
	cluster *kfake.Cluster
	// opts reach the cluster from inside the bubble (a test's consumer).
	opts []kgo.Opt
	prod *Producer
	reg  *prometheus.Registry
	// release lets held produce requests through (holdProduce).
	release func()
}

// newBubble starts a kfake cluster on a virtual network and a producer on
// it; cfg's Topic, Kafka options and telemetry are set here. It must run
// inside synctest.Test; everything it starts is stopped by t.Cleanup.
func newBubble(t *testing.T, cfg Config) *bubble {
	t.Helper()
	var stack kfake.VirtualNetwork
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(19092), kfake.ListenFn(stack.Listen),
		kfake.SeedTopics(2, testTopic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	reg := prometheus.NewRegistry()
	cfg.Topic = testTopic
	cfg.Kafka = kafkaconf.Config{Brokers: c.ListenAddrs()}
	cfg.KafkaOpts = []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.Dialer(stack.DialContext)}
	cfg.MaxRecordBytes = cmpOr(cfg.MaxRecordBytes, 1<<10)
	cfg.Logger, cfg.Registerer = zaptest.NewLogger(t), reg
	p, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return &bubble{cluster: c, opts: cfg.KafkaOpts, prod: p, reg: reg, release: func() {}}
}

func cmpOr(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// holdProduce makes the broker hold every produce request, unanswered,
// until b.release: Kafka is up but never acks.
func (b *bubble) holdProduce(t *testing.T) {
	t.Helper()
	released := make(chan struct{})
	var once sync.Once
	b.release = func() { once.Do(func() { close(released) }) }
	t.Cleanup(b.release)
	b.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.cluster.KeepControl()
		b.cluster.SleepControl(func() { <-released })
		return nil, nil, false
	})
}

func records(keys ...string) []*kgo.Record {
	recs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		recs[i] = &kgo.Record{Topic: testTopic, Key: []byte(k), Value: []byte("v-" + k)}
	}
	return recs
}

// TestKafkaAckedIsDurableAtOnce: with Kafka answering, a write is durable
// in Kafka without waiting out any bound.
func TestKafkaAckedIsDurableAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, Config{SpoolDir: t.TempDir(), SpoolAfter: 300 * time.Millisecond})
		dur, err := b.prod.Write(context.Background(), records("a:1", "b:1"))
		require.NoError(t, err)
		require.Equal(t, Kafka, dur)
	})
}

// TestHeldAcksSpoolAfterTheBoundThenTheCircuitSpoolsAtOnce: Kafka up but
// never acking: the first call waits exactly SpoolAfter, then spools;
// the circuit then spools later calls at once; once the acks come back
// the replayer sends the spool in order and the circuit closes.
func TestHeldAcksSpoolAfterTheBoundThenTheCircuitSpoolsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 300 * time.Millisecond
		b := newBubble(t, Config{SpoolDir: t.TempDir(), SpoolAfter: after, ProduceTimeout: time.Second})
		ctx, stop := context.WithCancel(context.Background())
		replayed := make(chan error, 1)
		go func() { replayed <- b.prod.Run(ctx) }()
		b.holdProduce(t)

		start := time.Now()
		dur, err := b.prod.Write(context.Background(), records("u:1", "u:2"))
		require.NoError(t, err)
		require.Equal(t, Spooled, dur)
		require.Equal(t, after, time.Since(start), "the call waits exactly the bound")
		require.Equal(t, 1.0, testutil.ToFloat64(b.prod.m.spoolCircuitOpen))

		start = time.Now()
		dur, err = b.prod.Write(context.Background(), records("u:3"))
		require.NoError(t, err)
		require.Equal(t, Spooled, dur)
		require.Zero(t, time.Since(start), "an open circuit spools without waiting for Kafka")

		b.release()
		for testutil.ToFloat64(b.prod.m.spoolCircuitOpen) != 0 || b.prod.spooler.sp.Stats().Records != 0 {
			time.Sleep(10 * time.Millisecond) // fake time: the replayer's backoff passes at once
		}
		stop()
		require.NoError(t, <-replayed)
		require.GreaterOrEqual(t, testutil.ToFloat64(b.prod.m.spoolReplayed), 3.0)
	})
}

// TestHeldAcksWithoutSpoolFailWithinProduceTimeout: without a spool, a
// broker that never answers fails the call after exactly ProduceTimeout
// (kgo's delivery timeout alone does not bound a held request).
func TestHeldAcksWithoutSpoolFailWithinProduceTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, Config{ProduceTimeout: time.Second})
		b.holdProduce(t)
		start := time.Now()
		dur, err := b.prod.Write(context.Background(), records("ivy:c1", "ivy:c2"))
		require.Equal(t, Unacknowledged, dur)
		require.ErrorContains(t, err, "producing 2 records (attempt 1, 2 not acked): waiting for acks: context deadline exceeded")
		require.Equal(t, time.Second, time.Since(start))
	})
}

// TestCallerDeadlineShorterThanTheBoundStillSpools: a caller that gives
// the call less than SpoolAfter gets its marks spooled before its
// deadline (spoolReserve is kept for the append), and a wait cut short by
// the caller says nothing about Kafka: the circuit stays closed.
func TestCallerDeadlineShorterThanTheBoundStillSpools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, Config{SpoolDir: t.TempDir(), SpoolAfter: 2 * time.Second, ProduceTimeout: 5 * time.Second})
		b.holdProduce(t)
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		dur, err := b.prod.Write(ctx, records("ned:c1"))
		require.NoError(t, err)
		require.Equal(t, Spooled, dur)
		require.Equal(t, 1500*time.Millisecond-spoolReserve, time.Since(start))
		require.Equal(t, int64(1), b.prod.spooler.sp.Stats().Records)
		require.Zero(t, testutil.ToFloat64(b.prod.m.spoolCircuitOpen))
	})
}

// TestFullSpoolRefusesAtOnce: records that do not fit the spool are
// refused by Refuse before any wait, and Write answers an error without
// acknowledging anything.
func TestFullSpoolRefusesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 300 * time.Millisecond
		b := newBubble(t, Config{SpoolDir: t.TempDir(), SpoolAfter: after, ProduceTimeout: time.Second,
			MaxRecordBytes: 100, SpoolMaxBytes: MinSpoolBytes(100)})
		b.holdProduce(t)
		dur, err := b.prod.Write(context.Background(), records("a:1"))
		require.NoError(t, err)
		require.Equal(t, Spooled, dur)

		big := records("b:1", "b:2", "b:3", "b:4", "b:5", "b:6", "b:7", "b:8", "b:9", "b:10")
		start := time.Now()
		require.ErrorIs(t, b.prod.Refuse(big), spool.ErrFull, "a full spool refuses up front")
		dur, err = b.prod.Write(context.Background(), big)
		require.ErrorIs(t, err, spool.ErrFull)
		require.Equal(t, Unacknowledged, dur)
		require.Zero(t, time.Since(start), "the circuit is open: no wait for Kafka")
	})
}

// TestStopDrainsTheSpool: records spooled while Kafka held its acks are
// sent when Run is stopped and Kafka answers again, within
// SpoolDrainTimeout; while Kafka stays away, the stop gives up after
// exactly the bound and the records stay in the spool.
func TestStopDrainsTheSpool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after, drain = 300 * time.Millisecond, 5 * time.Second
		b := newBubble(t, Config{SpoolDir: t.TempDir(), SpoolAfter: after, ProduceTimeout: time.Second, SpoolDrainTimeout: drain})
		b.holdProduce(t)
		dur, err := b.prod.Write(context.Background(), records("d:1", "d:2"))
		require.NoError(t, err)
		require.Equal(t, Spooled, dur)

		// Kafka still away: the stop waits out the drain bound, no more.
		ctx, stop := context.WithCancel(context.Background())
		stop()
		start := time.Now()
		require.NoError(t, b.prod.Run(ctx))
		require.Equal(t, drain, time.Since(start), "the drain gives up at its bound")
		require.EqualValues(t, 2, b.prod.spooler.sp.Stats().Records, "what was not sent stays spooled")

		// Kafka back: the stop sends everything and returns at once after.
		b.release()
		require.NoError(t, b.prod.Run(ctx))
		require.Zero(t, b.prod.spooler.sp.Stats().Records)
		require.GreaterOrEqual(t, testutil.ToFloat64(b.prod.m.spoolReplayed), 2.0)
	})
}

// TestSpooledRecordsKeepTheirHeaders: a record spooled with the trace
// context (traceparent, tracestate) reaches Kafka through the replayer
// with those headers, and one without headers gains none; a header past
// the spool's bounds is dropped, the record kept.
func TestSpooledRecordsKeepTheirHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, Config{SpoolDir: t.TempDir(), SpoolAfter: 300 * time.Millisecond, ProduceTimeout: time.Second})
		ctx, stop := context.WithCancel(context.Background())
		replayed := make(chan error, 1)
		go func() { replayed <- b.prod.Run(ctx) }()
		b.holdProduce(t)
		// The first call opens the circuit; the next ones then go to the
		// spool only, never to Kafka: what Kafka gets of them, the
		// replayer sent.
		dur, err := b.prod.Write(context.Background(), records("open:1"))
		require.NoError(t, err)
		require.Equal(t, Spooled, dur)
		tp := []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		recs := records("traced:1", "plain:1", "huge:1")
		recs[0].Headers = []kgo.RecordHeader{{Key: "traceparent", Value: tp}, {Key: "tracestate", Value: []byte("congo=t61rcWkgMzE")}}
		recs[2].Headers = []kgo.RecordHeader{{Key: "traceparent", Value: tp}, {Key: "tracestate", Value: make([]byte, spool.MaxHeaderBytes)}}
		start := time.Now()
		dur, err = b.prod.Write(context.Background(), recs)
		require.NoError(t, err)
		require.Equal(t, Spooled, dur)
		require.Zero(t, time.Since(start), "spooled at once: the circuit is open")

		b.release()
		for b.prod.spooler.sp.Stats().Records != 0 {
			time.Sleep(10 * time.Millisecond)
		}
		stop()
		require.NoError(t, <-replayed)

		cl, err := kgo.NewClient(append(b.opts, kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		require.NoError(t, err)
		defer cl.Close()
		got := map[string][]kgo.RecordHeader{}
		for len(got) < 4 {
			fctx, cancel := context.WithTimeout(context.Background(), time.Second)
			fs := cl.PollFetches(fctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = r.Headers })
		}
		require.Equal(t, []kgo.RecordHeader{{Key: "traceparent", Value: tp}, {Key: "tracestate", Value: []byte("congo=t61rcWkgMzE")}}, got["traced:1"])
		require.Empty(t, got["plain:1"])
		require.Equal(t, []kgo.RecordHeader{{Key: "traceparent", Value: tp}}, got["huge:1"], "the oversized tracestate is dropped, the traceparent kept")
	})
}
