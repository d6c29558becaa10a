package markcalls

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// testJob is a coalescer job of n marks.
type testJob struct {
	ctx  context.Context
	id   int
	n    int
	done chan struct{}
}

// testCoalescer records every flush; hold, when set, blocks each flush
// until it is closed.
type testCoalescer struct {
	c       *coalescer[*testJob]
	mu      sync.Mutex
	flushes [][]int // job ids per flush
	entered chan struct{}
	hold    chan struct{}
}

func newTestCoalescer(maxMarks, maxQueued, flushes int, hold chan struct{}) *testCoalescer {
	tc := &testCoalescer{entered: make(chan struct{}, 100), hold: hold}
	tc.c = &coalescer[*testJob]{
		flush: func(jobs []*testJob, _ func()) {
			tc.entered <- struct{}{}
			if tc.hold != nil {
				<-tc.hold
			}
			ids := make([]int, len(jobs))
			for i, j := range jobs {
				ids[i] = j.id
			}
			tc.mu.Lock()
			tc.flushes = append(tc.flushes, ids)
			tc.mu.Unlock()
			for _, j := range jobs {
				close(j.done)
			}
		},
		size:       func(j *testJob) int { return j.n },
		skip:       func(j *testJob) bool { return j.ctx.Err() != nil },
		maxMarks:   maxMarks,
		maxQueued:  maxQueued,
		maxFlushes: flushes,
		tails:      make(chan struct{}, 1),
		m:          newCoalesceMetrics(prometheus.NewRegistry()),
	}
	return tc
}

func (tc *testCoalescer) job(ctx context.Context, id, n int) *testJob {
	return &testJob{ctx: ctx, id: id, n: n, done: make(chan struct{})}
}

func (tc *testCoalescer) flushed() [][]int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([][]int(nil), tc.flushes...)
}

func TestCoalescerIdleFlushesOnTheCallersGoroutine(t *testing.T) {
	t.Parallel()
	tc := newTestCoalescer(100, 1000, 1, nil)
	j := tc.job(t.Context(), 1, 1)
	require.NoError(t, tc.c.submit(j))
	// No wait for company: the job is written before submit returns.
	select {
	case <-j.done:
	default:
		t.Fatal("an idle coalescer did not flush the job at once")
	}
	require.Equal(t, [][]int{{1}}, tc.flushed())
}

func TestCoalescerGroupsCallsWaitingForABusySlot(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	tc := newTestCoalescer(100, 1000, 1, hold)
	first := tc.job(t.Context(), 0, 1)
	go func() { _ = tc.c.submit(first) }()
	<-tc.entered // the only slot is busy from here

	jobs := make([]*testJob, 10)
	for i := range jobs {
		jobs[i] = tc.job(t.Context(), i+1, 1)
		require.NoError(t, tc.c.submit(jobs[i])) // queued, returns at once
	}
	close(hold)
	for _, j := range append(jobs, first) {
		<-j.done
	}
	require.Equal(t, [][]int{{0}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, tc.flushed(), "the queued calls share one flush, in arrival order")
}

func TestCoalescerBoundsAFlushAndTheQueue(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	tc := newTestCoalescer(5, 15, 1, hold)
	first := tc.job(t.Context(), 0, 1)
	go func() { _ = tc.c.submit(first) }()
	<-tc.entered

	var jobs []*testJob
	for i, n := range []int{3, 3, 7, 2} { // 3+3 > 5: two flushes; 7 > 5 goes alone
		j := tc.job(t.Context(), i+1, n)
		require.NoError(t, tc.c.submit(j))
		jobs = append(jobs, j)
	}
	// 15 marks queued: the next call does not fit.
	require.ErrorIs(t, tc.c.submit(tc.job(t.Context(), 9, 1)), errQueueFull)

	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-tc.entered:
				hold <- struct{}{}
			case <-stop:
				return
			}
		}
	}()
	hold <- struct{}{}
	for _, j := range jobs {
		<-j.done
	}
	require.Equal(t, [][]int{{0}, {1}, {2}, {3}, {4}}, tc.flushed())
	require.Zero(t, tc.c.queued)
}

func TestCoalescerDropsCallsThatLeftBeforeTheirFlush(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	tc := newTestCoalescer(100, 1000, 1, hold)
	first := tc.job(t.Context(), 0, 1)
	go func() { _ = tc.c.submit(first) }()
	<-tc.entered

	gone, cancel := context.WithCancel(t.Context())
	left := tc.job(gone, 1, 1)
	stays := tc.job(t.Context(), 2, 1)
	require.NoError(t, tc.c.submit(left))
	require.NoError(t, tc.c.submit(stays))
	cancel()
	close(hold)
	<-stays.done
	require.Equal(t, [][]int{{0}, {2}}, tc.flushed(), "the call that left is not written")
	require.Zero(t, tc.c.queued)
}

func TestBatchContextOutlivesEachCallerAndKeepsTheLatestDeadline(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, cancelA := context.WithDeadline(t.Context(), now.Add(time.Second))
	b, cancelB := context.WithDeadline(t.Context(), now.Add(3*time.Second))
	defer cancelB()
	ctx, cancel := batchContext([]context.Context{a, b})
	defer cancel()
	cancelA()
	require.NoError(t, ctx.Err(), "one caller leaving does not cancel the shared write")
	dl, ok := ctx.Deadline()
	require.True(t, ok)
	require.Equal(t, now.Add(3*time.Second), dl)

	ctx2, cancel2 := batchContext([]context.Context{b, t.Context()})
	defer cancel2()
	_, ok = ctx2.Deadline()
	require.False(t, ok, "a caller without a deadline lifts the bound")
}

func TestCoalescerOverlapsFlushesWaitingOnKafkaUpToTheBound(t *testing.T) {
	t.Parallel()
	inTail := make(chan int, 10)
	acks := map[int]chan struct{}{}
	for id := range 4 {
		acks[id] = make(chan struct{})
	}
	c := &coalescer[*testJob]{
		flush: func(jobs []*testJob, handOff func()) {
			handOff() // the Redis stage is done
			inTail <- jobs[0].id
			<-acks[jobs[0].id]
			for _, j := range jobs {
				close(j.done)
			}
		},
		size:       func(j *testJob) int { return j.n },
		skip:       func(j *testJob) bool { return j.ctx.Err() != nil },
		maxMarks:   1, // a flush per job
		maxQueued:  100,
		maxFlushes: 1,
		tails:      make(chan struct{}, 2),
		m:          newCoalesceMetrics(prometheus.NewRegistry()),
	}
	jobs := make([]*testJob, 4)
	for id := range jobs {
		jobs[id] = &testJob{ctx: t.Context(), id: id, n: 1, done: make(chan struct{})}
	}
	submit := func(id int) { go func() { _ = c.submit(jobs[id]) }() }

	// One slot, yet the second flush runs while the first waits for acks.
	submit(0)
	require.Equal(t, 0, <-inTail)
	submit(1)
	require.Equal(t, 1, <-inTail)
	// Two flushes wait on Kafka: the third keeps the slot until one ends,
	// and the fourth queues behind it.
	submit(2)
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.flushing == 1 && len(c.queue) == 0 }, 10*time.Second, time.Millisecond)
	submit(3)
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.queue) == 1 }, 10*time.Second, time.Millisecond)
	select {
	case id := <-inTail:
		t.Fatalf("flush %d went past the bound of two waiting on Kafka", id)
	default:
	}
	close(acks[0])
	<-jobs[0].done
	require.Equal(t, 2, <-inTail, "the third flush went on once the first was acked")
	// The fourth got the slot the third handed off, and waits in turn.
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.flushing == 1 && len(c.queue) == 0 }, 10*time.Second, time.Millisecond)
	close(acks[1])
	<-jobs[1].done
	require.Equal(t, 3, <-inTail)
	for id := 2; id < 4; id++ {
		close(acks[id])
		<-jobs[id].done
	}
	// A flush gives its tail token back after its callers are answered.
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.flushing == 0 && len(c.tails) == 0 }, 10*time.Second, time.Millisecond,
		"every slot and tail token given back")
}
