package persister_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/persister"
)

// The lag gauge shows the backlog while Postgres is down (nothing can be
// committed) and drops to 0 once the persister has caught up.
func TestConsumerLagIsExported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`ALTER TABLE read_receipts RENAME TO read_receipts_down`)
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, encode(t, state(fmt.Sprintf("lag%d", i), "c", 3, 3)))
	}
	b.produce(b.cl, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.LagInterval = 50 * time.Millisecond
	b.start(cfg)
	require.Eventually(t, func() bool {
		return lagSum(t, reg) == 40
	}, waitFor, 20*time.Millisecond, "the whole backlog shows while nothing can be committed")

	b.exec(`ALTER TABLE read_receipts_down RENAME TO read_receipts`)
	b.requireCommittedToEnd()
	require.Eventually(t, func() bool {
		return lagSum(t, reg) == 0
	}, waitFor, 20*time.Millisecond)
}

// lagSum sums the per-partition lag gauge.
func lagSum(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "receipts_persister_consumer_lag_records" {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// The lag in seconds is the age of the record at the group's committed
// offset (the oldest not consumed), per partition, from the records'
// timestamps; 0 where the group is at the end. Offsets are committed by
// hand here (no persister runs, only its exporter), so every age is known.
func TestConsumerLagSecondsIsTheAgeOfTheOldestUnconsumedRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cl := b.broker.Client(t, kgo.DefaultProduceTopic(b.broker.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	hourAgo := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	rec := func(partition int32, i int, ts time.Time) *kgo.Record {
		r := encode(t, state(fmt.Sprintf("age%d-%d", partition, i), "c", 1, 1))
		r.Partition, r.Timestamp = partition, ts
		return r
	}
	for i := range 10 { // partition 0: an hour old, a second apart
		recs = append(recs, rec(0, i, hourAgo.Add(time.Duration(i)*time.Second)))
	}
	for i := range 3 { // partition 2: ten minutes old
		recs = append(recs, rec(2, i, hourAgo.Add(50*time.Minute+time.Duration(i)*time.Second)))
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	commit := func(p int32, offset int64) {
		t.Helper()
		o := kadm.Offsets{}
		o.AddOffset(b.broker.Topic, p, offset, -1)
		resp, err := b.adm.CommitOffsets(ctx, b.broker.Group, o)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	commit(0, 4) // records 0-3 consumed: the oldest left is 4 s younger

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.LagInterval = 50 * time.Millisecond
	p, err := persister.New(cfg)
	require.NoError(t, err)
	defer p.Close() // after the exporter stopped (defers run last first)
	lagCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.LagExporter().Run(lagCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	seconds := func(partition string) float64 {
		return metric(t, reg, "receipts_persister_consumer_lag_seconds", "partition", partition)
	}
	require.Eventually(t, func() bool { return seconds("0") > 0 && seconds("2") > 0 }, waitFor, 20*time.Millisecond)
	// Bounds from the timestamps: at least their age, at most that plus how
	// long this test has been running.
	slack := time.Minute.Seconds()
	require.InDelta(t, time.Hour.Seconds()-4, seconds("0"), slack, "age of the record at the committed offset 4")
	require.GreaterOrEqual(t, seconds("0"), time.Hour.Seconds()-4)
	require.InDelta(t, (10 * time.Minute).Seconds(), seconds("2"), slack, "no commit: the first record's age")
	require.GreaterOrEqual(t, seconds("2"), (10 * time.Minute).Seconds())
	require.Zero(t, seconds("1"), "an empty partition does not lag")
	require.Equal(t, 6.0, metric(t, reg, "receipts_persister_consumer_lag_records", "partition", "0"))

	// The persister consumes and commits everything: caught up, 0.
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- p.Run(runCtx) }()
	b.requireCommittedToEnd()
	require.Eventually(t, func() bool { return seconds("0") == 0 && seconds("2") == 0 }, waitFor, 20*time.Millisecond)
	stopRun()
	require.NoError(t, <-ran)
}
