package drainbench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	require.True(t, math.IsNaN(Median(nil)))
	require.Equal(t, 2.0, Median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}))
	xs := []float64{3, 1, 2}
	Median(xs)
	require.Equal(t, []float64{3, 1, 2}, xs, "the input is left as it was")
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 58412.4: "58,412", 1234567: "1,234,567", -1500: "-1,500"} {
		require.Equal(t, want, thousands(in))
	}
}

// TestSummarizeRatiosPerRound: ratios are taken within a round, then the
// median; variant B is compared with A of the same round.
func TestSummarizeRatiosPerRound(t *testing.T) {
	t.Parallel()
	drain := func(round int, variant string, eps float64) *DrainResult {
		return &DrainResult{Round: round, Variant: variant, EventsPerSec: eps, FinalRowsPerSec: eps / 5, Seconds: 1}
	}
	base := func(round int, copyRate, naive float64) *Baselines {
		return &Baselines{Round: round,
			Copy:  []CopyResult{{Table: "read_receipts", Conns: 1, RowsPerSec: copyRate}, {Table: PlainTable, Conns: 1, RowsPerSec: 2 * copyRate}},
			Naive: &NaiveResult{Events: 100, Conns: 16, EventsPerSec: naive}}
	}
	res := &Result{
		Variants: []Variant{{Name: "A", Bin: "a"}, {Name: "B", Bin: "b"}},
		Drains: []*DrainResult{
			drain(1, "A", 100), drain(1, "B", 200),
			drain(2, "B", 90), drain(2, "A", 30), // a slow round for both
			drain(3, "A", 110), drain(3, "B", 220),
		},
		Baselines: []*Baselines{base(1, 40, 10), base(2, 10, 3), base(3, 44, 11)},
	}
	s := Summarize(res)
	row := func(prefix string) SummaryRow {
		for _, r := range s.Variants {
			if strings.HasPrefix(r.Figure, prefix) {
				return r
			}
		}
		t.Fatalf("no row %q", prefix)
		return SummaryRow{}
	}
	eps := row("drain: events/s")
	require.Equal(t, []float64{100, 200}, eps.Medians)
	require.Equal(t, [][]float64{{100, 30, 110}, {200, 90, 220}}, eps.Rounds)

	vsNaive := row("ratio: drain events/s ÷ naive")
	require.Equal(t, [][]float64{{10, 10, 10}, {20, 30, 20}}, vsNaive.Rounds)
	require.Equal(t, []float64{10, 20}, vsNaive.Medians)

	vsCopy := row("ratio: drain final rows/s ÷ COPY rows/s (read_receipts, 1 conn)")
	require.InDeltaSlice(t, []float64{20.0 / 40, 6.0 / 10, 22.0 / 44}, vsCopy.Rounds[0], 1e-9)

	vsA := row("ratio: drain events/s ÷ variant A's")
	require.Empty(t, vsA.Rounds[0], "A is the reference")
	require.Equal(t, []float64{2, 3, 2}, vsA.Rounds[1])
	require.Equal(t, 2.0, vsA.Medians[1])

	for _, r := range s.Variants {
		require.False(t, strings.Contains(r.Figure, "2 conns"), "no 2-connection COPY was measured: %s", r.Figure)
	}
	require.NotEmpty(t, s.Baselines)
	res.Summary = s
	md := Markdown(res)
	require.Contains(t, md, "| drain: events/s")
	require.Contains(t, md, "**100** (100 / 30 / 110)")
}

// TestRerender: a stored result is re-derived with this build's rules
// (only the drain's Postgres processes count), and its summary rewritten.
func TestRerender(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := &Result{
		Dir:      dir,
		Dataset:  DatasetStats{Events: 1_000_000},
		Variants: []Variant{{Name: "A", Bin: "p"}},
		Drains: []*DrainResult{{Round: 1, Variant: "A", EventsPerSec: 50_000, Seconds: 20, CPU: CPUResult{
			WallSeconds: 20, Persister: 10, Machine: 30, Postgres: 99,
			PostgresBreakdown: map[string]float64{pgPersister: 11, pgBackground: 0.5, pgPostmaster: 0.5, pgEnded: 4, pgOtherClient: 7, pgHarness: 1},
		}}},
	}
	require.NoError(t, writeResult(res, dir))
	got, err := Rerender(dir)
	require.NoError(t, err)
	c := got.Drains[0].CPU
	require.InDelta(t, 12.0, c.Postgres, 1e-9, "the persister's sessions, background and postmaster only")
	require.InDelta(t, 24.0, c.PostgresAll, 1e-9)
	require.InDelta(t, 12.0, c.PostgresUsPerEvent, 1e-9)
	require.InDelta(t, 10.0, c.PersisterUsPerEvent, 1e-9)
	require.InDelta(t, 1.5, c.BusyCores, 1e-9)
	require.NotEmpty(t, got.Summary.Variants)
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "**50,000**")
}
