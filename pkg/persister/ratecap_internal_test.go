package persister

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// capped builds a persister (no Kafka client: only its write cap is used)
// with the cap and statement size given.
func capped(rate float64, statementRows, writers int) *Persister {
	cfg := Config{MaxWriteRate: rate, StatementRows: statementRows, Writers: writers, Registerer: prometheus.NewRegistry()}
	return newPersister(cfg.withDefaults())
}

// In a synctest bubble time is exact: at 100 rows/s with statements of 500
// rows, the first statement goes at once (one statement of burst) and each
// next one 5 s later, whether one writer asks or two race for it; in 20 s
// at most 100 rows/s × 20 s + one burst are written.
func TestWriteCapPacesStatementsAtTheRate(t *testing.T) {
	for _, writers := range []int{1, 2} {
		synctest.Test(t, func(t *testing.T) {
			p := capped(100, 500, writers)
			ctx := context.Background()
			start := time.Now()
			var mu sync.Mutex
			var at []time.Duration
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := w; i < 5; i += writers {
						require.NoError(t, p.wcap.wait(ctx, 500))
						mu.Lock()
						at = append(at, time.Since(start))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			require.Equal(t, []time.Duration{0, 5 * time.Second, 10 * time.Second, 15 * time.Second, 20 * time.Second}, at, "writers %d", writers)
			// One writer waits 0+5+5+5+5 s; two overlap their waits
			// (how much depends on who asks first), at least as long.
			if writers == 1 {
				require.InDelta(t, 20.0, counterValue(t, p.m.throttled), 0.001)
			} else {
				require.GreaterOrEqual(t, counterValue(t, p.m.throttled), 20.0)
			}
		})
	}
}

// Small statements spend the burst, then go at the rate: 250 statements of
// 2 rows at 100 rows/s with a burst of 500 take 0 s; 50 more take 1 s.
func TestWriteCapCountsRowsNotStatements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := capped(100, 500, 1)
		start := time.Now()
		for range 250 {
			require.NoError(t, p.wcap.wait(context.Background(), 2))
		}
		require.Zero(t, time.Since(start))
		for range 50 {
			require.NoError(t, p.wcap.wait(context.Background(), 2))
		}
		require.Equal(t, time.Second, time.Since(start))
	})
}

// A statement waiting for the cap stops when the persister stops (its
// context ends), at once.
func TestWriteCapWaitEndsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := capped(1, 500, 1)
		require.NoError(t, p.wcap.wait(context.Background(), 500))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		start := time.Now()
		go func() { done <- p.wcap.wait(ctx, 500) }()
		synctest.Wait() // blocked in the limiter
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.Zero(t, time.Since(start), "no wait for the 500 s the rows would need")
	})
}

// No cap: no limiter at all, nothing ever waits.
func TestNoWriteCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := capped(0, 500, 2)
		require.Nil(t, p.wcap)
		start := time.Now()
		for range 1000 {
			require.NoError(t, p.wcap.wait(context.Background(), 500))
		}
		require.Zero(t, time.Since(start))
	})
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}
