package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/gate/server"
	"github.com/readstate/receipts/pkg/gatetest"
	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// testConfig is what a test's gate, its server and its producer are
// built with.
type testConfig struct {
	gate.Config
	// Server is the API server's config.
	Server server.Config
	// Durable is the producer's config.
	Durable producer.Config
}

// testBundle is one test's gate, served on 127.0.0.1:0, and its backends.
type testBundle struct {
	cfg    testConfig // what the gate and its producer were built with
	stop   func()     // stops the server, then its producer (idempotent)
	gate   *gate.Gate
	server *server.Server
	url    string
	rdb    *redis.Client
	prefix string
	store  *redisstore.Store // a second view on the test prefix, for asserts
	broker *kafkatest.Broker
	schema *pgtest.Schema
	reg    *prometheus.Registry
	h1     *http.Client // HTTP/1.1
	h2c    *http.Client // unencrypted HTTP/2, for gRPC
}

type setupOpts struct {
	config func(*testConfig)
	// redis replaces the test Redis client (e.g. one on a closed port).
	redis redis.UniversalClient
	// restoreTimeout, when set, gives the gate the persister group's
	// barrier, as kafkagate does, with this bound: restores after a
	// Redis loss wait for the persister (restore.go).
	restoreTimeout time.Duration
}

func setup(t testing.TB, o setupOpts) *testBundle {
	t.Helper()
	rdb := redistest.Client(t)
	tb := &testBundle{
		rdb:    rdb,
		prefix: redistest.Prefix(t, rdb),
		broker: kafkatest.New(t),
		schema: pgtest.NewSchema(t),
		reg:    prometheus.NewRegistry(),
	}
	tb.store = redisstore.New(rdb, redisstore.Config{Prefix: tb.prefix})
	var gateRedis redis.UniversalClient = rdb
	if o.redis != nil {
		gateRedis = o.redis
	}
	log := zaptest.NewLogger(t)
	cfg := testConfig{
		Config: gate.Config{
			Redis:       gateRedis,
			RedisPrefix: tb.prefix,
			Postgres:    tb.schema.Store,
			Logger:      log,
			Registerer:  tb.reg,
		},
		Server: server.Config{Logger: log, Registerer: tb.reg},
		Durable: producer.Config{
			Kafka:            kafkaconf.Config{Brokers: tb.broker.Seeds},
			KafkaOpts:        kafkatest.FastClientOpts(tb.broker.Seeds),
			Topic:            tb.broker.Topic,
			MaxRecordBytes:   gate.MaxRecordBytes,
			MetricsSubsystem: gate.MetricsSubsystem,
			Logger:           log,
			Registerer:       tb.reg,
		},
	}
	if o.restoreTimeout > 0 {
		cl := tb.broker.Client(t)
		cfg.Restore = gate.RestoreConfig{
			Barrier: grouplag.NewBarrier(grouplag.BarrierConfig{Admin: kadm.NewClient(cl), Group: tb.broker.Group, Topic: tb.broker.Topic, Poll: 5 * time.Millisecond}),
			Timeout: o.restoreTimeout, Cooldown: 10 * time.Millisecond,
		}
	}
	if o.config != nil {
		o.config(&cfg)
	}
	tb.cfg = cfg
	tb.gate, tb.server, tb.url, tb.stop = startGate(t, cfg)

	tb.h1 = &http.Client{Timeout: 30 * time.Second}
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	tb.h2c = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Protocols: &h2}}
	t.Cleanup(tb.h1.CloseIdleConnections)
	t.Cleanup(tb.h2c.CloseIdleConnections)
	return tb
}

// startGate serves a gate built from cfg on 127.0.0.1:0 until stop or
// the end of the test (gatetest.Serve: as kafkagate's runner does).
func startGate(t testing.TB, cfg testConfig) (g *gate.Gate, srv *server.Server, url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g, srv, stop = gatetest.Serve(t, gatetest.Config{Gate: cfg.Config, Server: cfg.Server, Durable: cfg.Durable}, ln)
	return g, srv, "http://" + ln.Addr().String(), stop
}

// client is a ReceiptService client on the gate's port over h2c.
func (tb *testBundle) client(opts ...connect.ClientOption) receiptsv1connect.ReceiptServiceClient {
	return receiptsv1connect.NewReceiptServiceClient(tb.h2c, tb.url, opts...)
}

// do sends a REST request and returns the status and body.
func (tb *testBundle) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	resp, b := tb.doResp(t, method, path, body)
	return resp.StatusCode, b
}

// doResp sends a REST request and returns the response (body read) and
// the body.
func (tb *testBundle) doResp(t *testing.T, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tb.url+path, r)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := tb.h1.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// doProto sends a REST request, requires 200 and decodes the answer.
func (tb *testBundle) doProto(t *testing.T, method, path, body string, out proto.Message) {
	t.Helper()
	status, b := tb.do(t, method, path, body)
	require.Equal(t, http.StatusOK, status, "body: %s", b)
	require.NoError(t, protojson.Unmarshal(b, out), "body: %s", b)
}

// restError is the JSON google.rpc.Status of a REST error.
type restError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func parseRESTError(t *testing.T, b []byte) restError {
	t.Helper()
	var e restError
	require.NoError(t, json.Unmarshal(b, &e), "body: %s", b)
	return e
}

// consume reads n records from the start of the test topic, decoded.
func (tb *testBundle) consume(t *testing.T, n int) ([]*kgo.Record, []receipt.State) {
	t.Helper()
	recs, states := tb.consumeUntil(t, func(recs []*kgo.Record, _ []receipt.State) bool { return len(recs) >= n })
	require.Len(t, recs, n)
	return recs, states
}

// consumeUntil reads the test topic from the start, decoded, until done
// says so (it sees everything read so far) or 15s pass. Records of one key
// come in their partition's order.
func (tb *testBundle) consumeUntil(t *testing.T, done func([]*kgo.Record, []receipt.State) bool) ([]*kgo.Record, []receipt.State) {
	t.Helper()
	cl := tb.broker.Client(t, kgo.ConsumeTopics(tb.broker.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var recs []*kgo.Record
	var states []receipt.State
	for !done(recs, states) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "waiting for records, have %d", len(recs))
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetching %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			st, err := event.Decode(r)
			require.NoError(t, err)
			recs = append(recs, r)
			states = append(states, st)
		})
	}
	return recs, states
}

// ok makes a REST call that must answer 200 and returns its body.
func (tb *testBundle) ok(t *testing.T, method, path, body string) []byte {
	t.Helper()
	status, b := tb.do(t, method, path, body)
	require.Equal(t, http.StatusOK, status, "%s %s: %s", method, path, b)
	return b
}

// highWatermarks sums the topic's high watermarks: 0 means nothing was ever
// produced.
func (tb *testBundle) highWatermarks(t *testing.T) int64 {
	t.Helper()
	var sum int64
	for p := int32(0); p < kafkatest.Partitions; p++ {
		pi := tb.broker.Cluster.PartitionInfo(tb.broker.Topic, p)
		require.NotNil(t, pi)
		sum += pi.HighWatermark
	}
	return sum
}

// redisKeys lists the keys under the test prefix.
func (tb *testBundle) redisKeys(t *testing.T) []string {
	t.Helper()
	keys, err := tb.rdb.Keys(context.Background(), tb.prefix+"*").Result()
	require.NoError(t, err)
	return keys
}

// closedAddr is a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// pos is a position at epoch 0.
func pos(seq int64) receipt.Position { return receipt.Position{Seq: seq} }

// gathered reads a gauge or counter without labels from a registry.
func gathered(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		require.Len(t, mf.GetMetric(), 1, name)
		m := mf.GetMetric()[0]
		if m.GetGauge() != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// metric reads the counter or histogram sample count of name whose labels
// are exactly labels (name=value pairs) from tb's registry; 0 when the
// child does not exist yet (nothing counted), as a vector's child reads
// before its first count.
func (tb *testBundle) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	require.Zero(t, len(labels)%2, "labels are name, value pairs")
	mfs, err := tb.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels)/2 {
				continue
			}
			for _, l := range m.GetLabel() {
				found := false
				for i := 0; i < len(labels); i += 2 {
					if labels[i] == l.GetName() && labels[i+1] == l.GetValue() {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
		return 0
	}
	return 0
}
