package persister_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
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
