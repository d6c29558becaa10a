package persister_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

const waitFor = 20 * time.Second

// bundle is one test's world: a schema, a broker with unique topics and
// group, and clients to produce and inspect.
type bundle struct {
	t      *testing.T
	schema *pgtest.Schema
	broker *kafkatest.Broker
	cl     *kgo.Client // producer and plain consumer helper
	adm    *kadm.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{t: t, schema: pgtest.NewSchema(t), broker: kafkatest.New(t)}
	b.cl = b.broker.Client(t)
	b.adm = kadm.NewClient(b.cl)
	return b
}

// config is a persister config on the bundle, fast to retry.
func (b *bundle) config(reg prometheus.Registerer) persister.Config {
	return persister.Config{
		Kafka:        kafkaconf.Config{Brokers: b.broker.Seeds},
		KafkaOpts:    kafkatest.FastClientOpts(b.broker.Seeds),
		Topic:        b.broker.Topic,
		DLTTopic:     b.broker.DLTTopic,
		Group:        b.broker.Group,
		Postgres:     pgstore.Config{URL: pgtest.URL(), Schema: b.schema.Name, MaxConns: 4},
		Retry:        backoff.Config{Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond},
		DrainTimeout: 5 * time.Second,
		Logger:       zaptest.NewLogger(b.t, zaptest.Level(zap.InfoLevel)),
		Registerer:   reg,
	}
}

// running is a persister whose Run goroutine the test controls.
type running struct {
	p      *persister.Persister
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
	err    error
	closed bool

	stopLag context.CancelFunc
	lagDone chan error
}

// start runs a persister; cleanup stops and closes it.
func (b *bundle) start(cfg persister.Config) *running {
	b.t.Helper()
	return b.startWith(cfg, nil)
}

// startWith is start with a hook run between New and Run.
func (b *bundle) startWith(cfg persister.Config, beforeRun func(*persister.Persister)) *running {
	b.t.Helper()
	reg, _ := cfg.Registerer.(*prometheus.Registry)
	p, err := persister.New(cfg)
	require.NoError(b.t, err)
	if beforeRun != nil {
		beforeRun(p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, reg: reg, cancel: cancel, done: make(chan error, 1), lagDone: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	// The lag exporter runs beside Run, as the binary's runner does.
	lagCtx, stopLag := context.WithCancel(context.Background())
	r.stopLag = stopLag
	if lag := p.LagExporter(); lag != nil {
		go func() { r.lagDone <- lag.Run(lagCtx) }()
	} else {
		r.lagDone <- nil
	}
	b.t.Cleanup(func() { _ = r.stop(b.t) })
	return r
}

// stop cancels Run, waits for its drain and closes the persister.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	if r.closed {
		return r.err
	}
	r.closed = true
	r.cancel()
	select {
	case r.err = <-r.done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return after cancel")
	}
	r.stopLag()
	require.NoError(t, <-r.lagDone)
	r.p.Close()
	return r.err
}

// state builds a state for user:channel with read and delivered seqs.
func state(user, channel string, read, delivered int64) receipt.State {
	s := receipt.State{
		Key:             receipt.Key{User: user, Channel: channel},
		DeviceID:        "dev-1",
		UpdatedAtUnixMs: 1_700_000_000_000 + read,
	}
	if read > 0 {
		s.Read = receipt.Cursor{Position: receipt.Position{Seq: read}, MessageID: fmt.Sprintf("m%d", read)}
	}
	if delivered > 0 {
		s.Delivered = receipt.Cursor{Position: receipt.Position{Seq: delivered}, MessageID: fmt.Sprintf("m%d", delivered)}
	}
	return s
}

func encode(t *testing.T, s receipt.State) *kgo.Record {
	t.Helper()
	r, err := event.Encode(s)
	require.NoError(t, err)
	return r
}

// produce writes records to the topic and returns them with their offsets.
func (b *bundle) produce(cl *kgo.Client, recs ...*kgo.Record) []*kgo.Record {
	b.t.Helper()
	for _, r := range recs {
		r.Topic = b.broker.Topic
	}
	res := cl.ProduceSync(context.Background(), recs...)
	require.NoError(b.t, res.FirstErr())
	return recs
}

// requireCommittedToEnd waits until the group's committed offset of every
// partition of the topic equals the partition's end offset.
func (b *bundle) requireCommittedToEnd() {
	b.t.Helper()
	ctx := context.Background()
	var last string
	require.Eventually(b.t, func() bool {
		ends, err := b.adm.ListEndOffsets(ctx, b.broker.Topic)
		if err != nil {
			last = err.Error()
			return false
		}
		committed, err := b.adm.FetchOffsets(ctx, b.broker.Group)
		if err != nil {
			last = err.Error()
			return false
		}
		ok := true
		ends.Each(func(lo kadm.ListedOffset) {
			c, found := committed.Lookup(lo.Topic, lo.Partition)
			at := int64(-1)
			if found {
				at = c.At
			}
			if lo.Offset > 0 && at != lo.Offset {
				last = fmt.Sprintf("partition %d: committed %d, end %d", lo.Partition, at, lo.Offset)
				ok = false
			}
		})
		return ok
	}, waitFor, 20*time.Millisecond, "committed offsets never reached the end: %s", &last)
}

// committed returns the group's committed offsets of the topic (absent
// partitions are left out).
func (b *bundle) committed() map[int32]int64 {
	b.t.Helper()
	got, err := b.adm.FetchOffsets(context.Background(), b.broker.Group)
	require.NoError(b.t, err)
	out := map[int32]int64{}
	for p, o := range got[b.broker.Topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out
}

// dltEnd returns the number of records on the dead-letter topic.
func (b *bundle) dltEnd() int64 {
	b.t.Helper()
	ends, err := b.adm.ListEndOffsets(context.Background(), b.broker.DLTTopic)
	require.NoError(b.t, err)
	var n int64
	ends.Each(func(lo kadm.ListedOffset) { n += lo.Offset })
	return n
}

// readDLT consumes exactly n records from the dead-letter topic.
func (b *bundle) readDLT(n int) []*kgo.Record {
	b.t.Helper()
	cl := b.broker.Client(b.t, kgo.ConsumeTopics(b.broker.DLTTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.t.Fatalf("read %d of %d dead letters: %v", len(out), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				b.t.Logf("dlt fetch: %v", err)
			}
		})
		out = append(out, fs.Records()...)
	}
	require.Len(b.t, out, n, "more dead letters than expected")
	return out
}

// rows returns every row of the schema's read_receipts by key.
func (b *bundle) rows() map[receipt.Key]receipt.State {
	b.t.Helper()
	out := map[receipt.Key]receipt.State{}
	var after receipt.Key
	for {
		page, err := cursors.NewPostgres(b.schema.Store).Page(context.Background(), after, 1000)
		require.NoError(b.t, err)
		for _, s := range page {
			out[s.Key] = s
		}
		if len(page) < 1000 {
			return out
		}
		after = page[len(page)-1].Key
	}
}

// requireRows checks that the table holds exactly want's keys, each with
// want's cursors.
func (b *bundle) requireRows(want map[receipt.Key]receipt.State) {
	b.t.Helper()
	got := b.rows()
	require.Len(b.t, got, len(want))
	for k, w := range want {
		g := got[k]
		require.Equal(b.t, w.Read.Position, g.Read.Position, "read of %v", k)
		require.Equal(b.t, w.EffectiveRead(), g.EffectiveRead(), "own read of %v", k)
		require.Equal(b.t, w.Read.MessageID, g.Read.MessageID, "read message of %v", k)
		require.Equal(b.t, w.Delivered.Position, g.Delivered.Position, "delivered of %v", k)
		require.Equal(b.t, w.Delivered.MessageID, g.Delivered.MessageID, "delivered message of %v", k)
	}
}

func (b *bundle) exec(sql string) {
	b.t.Helper()
	_, err := b.schema.Store.Pool().Exec(context.Background(), sql)
	require.NoError(b.t, err)
}

// metric returns the value of a counter or gauge (with the given label
// pairs) from reg, or 0 when absent.
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
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
