package deadletter_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// bundle is one test's isolated stores: a Postgres schema and a Redis
// key prefix.
type bundle struct {
	schema *pgtest.Schema
	pg     *pgstore.Store
	rs     *redisstore.Store
	reg    *prometheus.Registry
}

func setup(t *testing.T) *bundle {
	t.Helper()
	schema := pgtest.NewSchema(t)
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(context.Background()))
	return &bundle{schema: schema, pg: schema.Store, rs: rs, reg: prometheus.NewRegistry()}
}

// state builds a state with read (and so delivered) at seq, or only
// delivered when read is false. UpdatedAtUnixMs is old, outside any grace.
func state(user, ch string, seq int64, read bool) receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + itoa(seq)}
	s := receipt.State{Key: receipt.Key{User: user, Channel: ch}, Delivered: c, DeviceID: "dev", UpdatedAtUnixMs: 1000}
	if read {
		s.Read = c
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// dltRecord wraps a value in a dead letter as the persister would send it,
// on partition 0 of the dead-letter topic.
func dltRecord(b *kafkatest.Broker, key, value []byte, srcPartition int32, srcOffset int64, reason string) *kgo.Record {
	src := &kgo.Record{Topic: b.Topic, Partition: srcPartition, Offset: srcOffset, Key: key, Value: value}
	r := event.DeadLetter(src, b.DLTTopic, reason)
	r.Partition = 0
	return r
}

func encode(t *testing.T, s receipt.State) *kgo.Record {
	t.Helper()
	r, err := event.Encode(s)
	require.NoError(t, err)
	return r
}

func produce(t *testing.T, b *kafkatest.Broker, recs ...*kgo.Record) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
}

// startConsumer runs a consumer until the test ends.
func startConsumer(t *testing.T, bd *bundle, b *kafkatest.Broker, group string, mod func(*deadletter.Config)) *deadletter.Consumer {
	t.Helper()
	cfg := deadletter.Config{
		Postgres:   bd.pg,
		Redis:      bd.rs,
		Kafka:      kafkaconf.Config{Brokers: b.Seeds},
		DLTTopic:   b.DLTTopic,
		Group:      group,
		Registerer: bd.reg,
		KafkaOpts:  kafkatest.FastClientOpts(b.Seeds),
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := deadletter.NewConsumer(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("consumer did not stop")
		}
		c.Close()
	})
	return c
}

// committed returns the group's committed offset on partition 0 of topic,
// or -1 when nothing is committed.
func committed(t *testing.T, b *kafkatest.Broker, group, topic string) int64 {
	t.Helper()
	adm := kadm.NewClient(b.Client(t))
	offs, err := adm.FetchOffsets(context.Background(), group)
	require.NoError(t, err)
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

// metric reads one counter or gauge from the registry; labels are
// name/value pairs. Missing series read as 0.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// pgState reads one key from Postgres; ok is false when there is no row.
func pgState(t *testing.T, pg *pgstore.Store, k receipt.Key) (receipt.State, bool) {
	t.Helper()
	rows, err := cursors.NewPostgres(pg).Get(context.Background(), k.User, []string{k.Channel})
	require.NoError(t, err)
	if len(rows) == 0 {
		return receipt.State{}, false
	}
	return rows[0], true
}

// redisState reads one key from Redis; ok is false when the field is
// missing.
func redisState(t *testing.T, rs *redisstore.Store, k receipt.Key) (receipt.State, bool) {
	t.Helper()
	sts, _, err := cursors.NewStore(rs).Get(context.Background(), k.User, []string{k.Channel})
	require.NoError(t, err)
	if len(sts) == 0 {
		return receipt.State{}, false
	}
	return sts[0], true
}

// proxy is a TCP proxy that can cut every connection and refuse new ones:
// a real network outage between a client and a server, for one test.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setCut(true)
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(c, up)
		go pipe(up, c)
	}
}

// setCut cuts (true) or restores (false) the network.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		p.conns = map[net.Conn]struct{}{}
	}
}
