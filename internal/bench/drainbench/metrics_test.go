package drainbench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP receipts_persister_batches_total Batches.
# TYPE receipts_persister_batches_total counter
receipts_persister_batches_total{trigger="count"} 40
receipts_persister_batches_total{trigger="linger"} 2
receipts_persister_batches_total{trigger="odd } \" label"} 1
receipts_persister_write_duration_seconds_bucket{le="0.001"} 3
receipts_persister_write_duration_seconds_sum 1.5
receipts_persister_write_duration_seconds_count 43
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_count 8
process_cpu_seconds_total 2.5e+00
other_metric 9
receipts_bad NaN
`
	m := ParseMetrics(text, "receipts_", "process_cpu_seconds_total", "go_gc_")
	require.Equal(t, map[string]float64{
		"receipts_persister_batches_total":                43,
		"receipts_persister_write_duration_seconds_sum":   1.5,
		"receipts_persister_write_duration_seconds_count": 43,
		"go_gc_duration_seconds_count":                    8,
		"process_cpu_seconds_total":                       2.5,
	}, m)
}
