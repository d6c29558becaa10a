package markcalls

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/readstate/receipts/pkg/gate/seam"
)

// errQueueFull answers a call when the write queue is full.
var errQueueFull = errors.New("the gateway's write queue is full")

// coalescer groups jobs into flushes. Each job's done channel is closed by
// flush once its results are set; a job's caller may stop waiting when its
// context ends (its marks may still be written, which is harmless: nothing
// was acknowledged, and every store max-merges).
type coalescer[J any] struct {
	// flush writes a batch and sets every job's result. It is called by at
	// most maxFlushes goroutines at once. It may call handOff once, when
	// what is left of it is waiting (on Kafka): its slot then goes to the
	// next batch while it finishes, at most cap(tails) flushes at once.
	flush func(batch []J, handOff func())
	// size is a job's number of marks; skip reports a job whose caller left
	// before its flush (it is dropped, unwritten).
	size func(J) int
	skip func(J) bool

	maxMarks, maxQueued, maxFlushes int
	// tails holds a token per flush past its hand-off; its capacity is
	// the bound.
	tails chan struct{}
	m     *coalesceMetrics

	mu       sync.Mutex
	queue    []J
	queued   int // marks in queue
	flushing int
}

type coalesceMetrics struct {
	batchMarks prometheus.Histogram
	queueFull  prometheus.Counter
}

func newCoalesceMetrics(reg prometheus.Registerer) *coalesceMetrics {
	f := promauto.With(reg)
	return &coalesceMetrics{
		batchMarks: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: seam.MetricsNamespace, Subsystem: seam.MetricsSubsystem, Name: "write_batch_marks",
			Help:    "marks per write flush (one Redis pipeline and one produce batch for concurrent calls).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048},
		}),
		queueFull: f.NewCounter(prometheus.CounterOpts{
			Namespace: seam.MetricsNamespace, Subsystem: seam.MetricsSubsystem, Name: "write_queue_full_total",
			Help: "Calls answered Unavailable because the write queue was full.",
		}),
	}
}

// submit queues j and, when a flush slot is free, flushes it (with what is
// queued) on the caller's goroutine. It returns errQueueFull when j does
// not fit in the queue; else the caller waits on j's done channel.
func (c *coalescer[J]) submit(j J) error {
	n := c.size(j)
	c.mu.Lock()
	if c.queued > 0 && c.queued+n > c.maxQueued {
		c.mu.Unlock()
		c.m.queueFull.Inc()
		return errQueueFull
	}
	c.queue = append(c.queue, j)
	c.queued += n
	if c.flushing >= c.maxFlushes {
		c.mu.Unlock()
		return nil
	}
	c.flushing++
	batch := c.takeLocked()
	c.mu.Unlock()
	c.run(batch)
	return nil
}

// run flushes batch. When the flush hands off (or ends, if it does not),
// and calls are queued, the slot goes to a new goroutine, so that this
// caller is answered without waiting for others.
func (c *coalescer[J]) run(batch []J) {
	handedOff := false
	handOff := func() {
		if handedOff {
			return
		}
		c.tails <- struct{}{} // wait, holding the slot, while too many flushes wait on Kafka
		handedOff = true
		c.next()
	}
	if len(batch) > 0 {
		c.flush(batch, handOff)
	}
	if handedOff {
		<-c.tails
		return
	}
	c.next()
}

// next gives the slot of a flush that ended or handed off to the queued
// calls, or frees it.
func (c *coalescer[J]) next() {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.flushing--
		c.mu.Unlock()
		return
	}
	next := c.takeLocked()
	c.mu.Unlock()
	go c.run(next)
}

// takeLocked removes the next batch from the queue: jobs in arrival order
// up to maxMarks (a bigger job goes alone), without those whose callers
// left.
func (c *coalescer[J]) takeLocked() []J {
	marks, i := 0, 0
	var batch []J
	for ; i < len(c.queue); i++ {
		j := c.queue[i]
		n := c.size(j)
		if c.skip(j) {
			c.queued -= n
			continue
		}
		if len(batch) > 0 && marks+n > c.maxMarks {
			break
		}
		batch = append(batch, j)
		marks += n
		c.queued -= n
	}
	var zero J
	for k := range i {
		c.queue[k] = zero // no reference kept to answered jobs
	}
	c.queue = c.queue[i:]
	if len(c.queue) == 0 {
		c.queue = c.queue[:0:0]
	}
	if marks > 0 {
		c.m.batchMarks.Observe(float64(marks))
	}
	return batch
}

// batchContext is the context of a flush shared by several callers: it
// keeps the first caller's values but is not cancelled by any of them
// leaving, and it is bounded by the latest of their deadlines when every
// one has a deadline (the producer shortens its wait for Kafka to leave a
// caller's deadline room for the spool).
func batchContext(ctxs []context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctxs[0])
	var latest time.Time
	for _, ctx := range ctxs {
		dl, ok := ctx.Deadline()
		if !ok {
			return context.WithCancel(base)
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(base, latest)
}
