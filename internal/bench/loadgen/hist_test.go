package loadgen

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBucketBounds(t *testing.T) {
	t.Parallel()
	prevHigh := int64(-1)
	for b := 0; b < numBuckets-1; b++ {
		hi := bucketHigh(b)
		require.Greater(t, hi, prevHigh, "bucket %d", b)
		require.Equal(t, b, bucketOf(hi), "high end of bucket %d", b)
		require.Equal(t, b, bucketOf(prevHigh+1), "low end of bucket %d", b)
		// Relative width stays within ~3 %.
		if lo := prevHigh + 1; lo >= subCount {
			require.LessOrEqual(t, float64(hi-lo+1)/float64(lo), 1.0/subCount+1e-9)
		}
		prevHigh = hi
		if hi > 1<<50 {
			break
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	p := h.Snapshot().Percentiles()
	require.EqualValues(t, 1000, p.Count)
	near := func(want, got time.Duration) {
		t.Helper()
		require.InDelta(t, float64(want), float64(got), float64(want)*0.035)
	}
	near(500*time.Millisecond, p.P50)
	near(950*time.Millisecond, p.P95)
	near(990*time.Millisecond, p.P99)
	require.Equal(t, time.Second, p.Max)

	// An interval's quantile sees only that interval's recordings.
	before := h.Snapshot()
	for range 100 {
		h.Record(5 * time.Second)
	}
	near(5*time.Second, h.Snapshot().Sub(before).Quantile(0.5))

	var empty histogram
	require.Zero(t, empty.Snapshot().Quantile(0.99))

	js, err := json.Marshal(p)
	require.NoError(t, err)
	require.Contains(t, string(js), `"max_ms":1000`)
}
