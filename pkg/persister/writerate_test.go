package persister_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/receipt"
)

// With --max-write-rate the whole pipeline (kfake → persister → Postgres)
// writes no faster than the cap: 600 new rows at 200 rows/s, statements of
// 100 rows (one statement of burst), cannot all be in Postgres before
// (600-100)/200 = 2.5 s, however fast everything else is. A lower bound,
// so no wall-clock race; the metric shows the statements waited.
func TestMaxWriteRateCapsRowsWritten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var recs []*kgo.Record
	want := map[receipt.Key]receipt.State{}
	for i := range 600 {
		s := state(fmt.Sprintf("cap%03d", i), "c", 4, 4)
		recs = append(recs, encode(t, s))
		want[s.Key] = s
	}
	b.produce(b.cl, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.MaxWriteRate = 200
	cfg.StatementRows = 100
	start := time.Now()
	run := b.start(cfg)
	b.requireCommittedToEnd()
	took := time.Since(start)
	b.requireRows(want)
	t.Logf("600 rows at 200 rows/s took %s", took)
	require.GreaterOrEqual(t, took, 2500*time.Millisecond, "faster than the cap allows")
	require.Equal(t, 600.0, metric(t, reg, "receipts_persister_rows_written_total"))
	require.GreaterOrEqual(t, metric(t, reg, "receipts_persister_write_throttle_seconds_total"), 2.0,
		"the statements waited for the cap")
	require.NoError(t, run.stop(t))
}

func TestMaxWriteRateIsValidated(t *testing.T) {
	t.Parallel()
	_, err := persister.New(persister.Config{MaxWriteRate: -1})
	require.ErrorContains(t, err, "MaxWriteRate must be a rate >= 0 (0: no cap), got -1")
}
