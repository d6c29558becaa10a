package persister

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// writeCap is the ADR's backpressure on Postgres: it paces the rows the
// persister writes to Config.MaxWriteRate per second, before each
// statement. While it holds a statement back, nothing else moves: the
// window waits, fetching stops once kgo's buffers are full, and Kafka keeps
// the backlog (the lag metrics show it). Its burst is one statement, so a
// statement is never split to fit and the long-run rate is the cap.
type writeCap struct {
	lim    *rate.Limiter
	waited prometheus.Counter
}

// newWriteCap returns the cap, or nil for none (rowsPerSecond 0).
func newWriteCap(rowsPerSecond float64, statementRows int, waited prometheus.Counter) *writeCap {
	if rowsPerSecond <= 0 {
		return nil
	}
	return &writeCap{lim: rate.NewLimiter(rate.Limit(rowsPerSecond), max(statementRows, 1)), waited: waited}
}

// wait blocks until rows may be written, or ctx ends (its error then).
func (c *writeCap) wait(ctx context.Context, rows int) error {
	if c == nil || rows <= 0 {
		return nil
	}
	start := time.Now()
	// A statement larger than the burst (none is: statements hold at most
	// StatementRows) pays for one burst.
	err := c.lim.WaitN(ctx, min(rows, c.lim.Burst()))
	c.waited.Add(time.Since(start).Seconds())
	return err
}
