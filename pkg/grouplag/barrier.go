package grouplag

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// BarrierPollDefault is how often a Barrier asks the brokers whether a
// fence is passed.
const BarrierPollDefault = 20 * time.Millisecond

// A Barrier tells whether a consumer group's sink holds every record
// produced to a topic before a moment: the gateway's restores after Redis
// lost data, and its Postgres reads while Redis is away, wait on one so
// that they never answer a value below one still in flight between Kafka
// and Postgres.
type Barrier struct {
	adm          *kadm.Client
	group, topic string
	poll         time.Duration
	// pending, when set, reports records acknowledged but not yet
	// produced (a local spool): a fence does not cover them.
	pending func() bool

	mu sync.Mutex
	// best is the greatest position seen per partition: the sink never
	// loses what it committed, so a fence below it is passed without
	// asking (a rewound group only replays).
	best map[int32]int64
	// next is the round new CatchUp callers join, before its fence is
	// taken.
	next *round
}

// BarrierConfig configures a Barrier.
type BarrierConfig struct {
	Admin        *kadm.Client
	Group, Topic string
	// Poll defaults to BarrierPollDefault.
	Poll time.Duration
	// Pending (optional) reports acknowledged records not yet produced.
	Pending func() bool
}

// NewBarrier returns a Barrier on cfg's group and topic.
func NewBarrier(cfg BarrierConfig) *Barrier {
	return &Barrier{
		adm: cfg.Admin, group: cfg.Group, topic: cfg.Topic,
		poll:    cmp.Or(cfg.Poll, BarrierPollDefault),
		pending: cfg.Pending,
		best:    map[int32]int64{},
	}
}

// Mark takes a fence now.
func (b *Barrier) Mark(ctx context.Context) (Fence, error) {
	return MarkFence(ctx, b.adm, b.topic)
}

// Passed reports whether the group has passed f: from the positions seen
// before, else by asking the brokers once.
func (b *Barrier) Passed(ctx context.Context, f Fence) (bool, error) {
	if b.passedSeen(f) {
		return true, nil
	}
	pos, err := Committed(ctx, b.adm, b.group, b.topic)
	if err != nil {
		return false, err
	}
	b.mu.Lock()
	for p, o := range pos {
		b.best[p] = max(b.best[p], o)
	}
	b.mu.Unlock()
	return b.passedSeen(f), nil
}

func (b *Barrier) passedSeen(f Fence) bool {
	if b.pending != nil && b.pending() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return f.PassedBy(b.best)
}

// Wait polls until the group has passed f or ctx ends.
func (b *Barrier) Wait(ctx context.Context, f Fence) error {
	t := time.NewTicker(b.poll)
	defer t.Stop()
	var last error
	for {
		ok, err := b.Passed(ctx, f)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for group %s to write %s: %w (last error: %w)", b.group, b.topic, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for group %s to write what %s held: %w", b.group, b.topic, ctx.Err())
		case <-t.C:
		}
	}
}

// round is one fence shared by the CatchUp calls that joined before it
// was taken.
type round struct {
	done    chan struct{}
	err     error
	waiters int
	cancel  context.CancelFunc
}

// CatchUp returns once the group has passed a fence taken after the call
// began, or ctx ends. Concurrent calls share fences: a call joins the
// round whose fence is not taken yet, so any number of callers costs one
// fence and one poll loop.
func (b *Barrier) CatchUp(ctx context.Context) error {
	b.mu.Lock()
	r := b.next
	if r == nil {
		rctx, cancel := context.WithCancel(context.Background())
		r = &round{done: make(chan struct{}), cancel: cancel}
		b.next = r
		go b.run(rctx, r)
	}
	r.waiters++
	b.mu.Unlock()

	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		b.mu.Lock()
		r.waiters--
		if r.waiters == 0 {
			r.cancel() // nobody waits: the round stops
		}
		b.mu.Unlock()
		return fmt.Errorf("catching up with %s: %w", b.topic, ctx.Err())
	}
}

func (b *Barrier) run(ctx context.Context, r *round) {
	defer r.cancel()
	defer close(r.done)
	b.mu.Lock()
	if b.next == r {
		b.next = nil // later callers start a round of their own
	}
	b.mu.Unlock()
	f, err := b.Mark(ctx)
	if err != nil {
		r.err = err
		return
	}
	r.err = b.Wait(ctx, f)
}
