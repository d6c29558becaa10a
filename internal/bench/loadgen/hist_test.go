package loadgen

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHistogramPrecision(t *testing.T) {
	t.Parallel()
	// One recording: every quantile is that value (within the histogram's
	// precision, never above the exact max).
	for _, d := range []time.Duration{time.Microsecond, 37 * time.Microsecond, 1234 * time.Microsecond,
		5 * time.Second, 59 * time.Minute} {
		var h histogram
		h.Record(d)
		p := h.Percentiles()
		require.EqualValues(t, 1, p.Count)
		require.LessOrEqual(t, p.P50, d, "%s", d)
		require.InDelta(t, float64(d), float64(p.P50), float64(d)*0.001+float64(time.Microsecond), "%s", d)
		require.Equal(t, d, p.Max)
	}
	// Beyond the range: counted at the top, the max stays exact.
	var h histogram
	h.Record(2 * time.Hour)
	p := h.Percentiles()
	require.InDelta(t, float64(time.Hour), float64(p.P99), float64(time.Hour)*0.001)
	require.Equal(t, 2*time.Hour, p.Max)
}

func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	p := h.Percentiles()
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
	near(500*time.Millisecond, h.IntervalQuantile(0.5))
	for range 100 {
		h.Record(5 * time.Second)
	}
	near(5*time.Second, h.IntervalQuantile(0.5))
	require.Zero(t, h.IntervalQuantile(0.5), "an interval without recordings")
	require.EqualValues(t, 1100, h.Percentiles().Count, "the run keeps every recording")

	var empty histogram
	require.Zero(t, empty.Percentiles().P99)
	require.Zero(t, empty.IntervalQuantile(0.99))

	js, err := json.Marshal(p)
	require.NoError(t, err)
	require.Contains(t, string(js), `"max_ms":1000`)
}
