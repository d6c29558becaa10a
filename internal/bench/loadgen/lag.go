package loadgen

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/readstate/receipts/pkg/receipt"
)

// LagResult is the end-to-end lag: for sampled events, the time from the
// gateway's acknowledgement until the durable store first answered with a
// value covering the event. Its resolution is the poll interval plus one
// read.
type LagResult struct {
	Percentiles
	// TimedOut samples were not covered within LagConfig.Timeout: either
	// the pipeline is that far behind or a write was lost.
	TimedOut int
	// Skipped samples were not taken because MaxPending were in flight.
	Skipped int
	// Unfinished samples were still pending when the run was cancelled.
	Unfinished int
	// Errors counts failed reads (each is retried at the next poll).
	Errors int
}

// MarshalJSON flattens the percentiles next to the counters.
func (l LagResult) MarshalJSON() ([]byte, error) {
	p, err := l.Percentiles.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, err
	}
	m["timed_out"], m["skipped"], m["unfinished"], m["read_errors"] = l.TimedOut, l.Skipped, l.Unfinished, l.Errors
	return json.Marshal(m)
}

type lagSample struct {
	want    receipt.State
	ackedAt time.Time
	done    bool
}

// lagSampler polls the durable store for sampled acknowledged events.
type lagSampler struct {
	cfg  LagConfig
	hist histogram

	mu       sync.Mutex
	pending  []*lagSample
	taken    int
	skipped  int
	timedOut int
	errors   atomic.Int64

	finishing chan struct{}
	finOnce   sync.Once
}

// readParallelism bounds concurrent reads of one poll round.
const readParallelism = 8

func newLagSampler(cfg LagConfig) *lagSampler {
	return &lagSampler{cfg: cfg, finishing: make(chan struct{})}
}

// offer considers the acknowledged events of one batch; before is the
// number of events acknowledged before this batch (events are numbered in
// ack order across workers).
func (s *lagSampler) offer(b batch, before int64, ackedAt time.Time) {
	every := int64(s.cfg.SampleEvery)
	first := (before/every+1)*every - before - 1 // index in b of the next multiple
	if first >= int64(len(b)) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := first; i < int64(len(b)); i += every {
		if s.taken >= s.cfg.MaxSamples {
			return
		}
		if len(s.pending) >= s.cfg.MaxPending {
			s.skipped++
			continue
		}
		s.taken++
		s.pending = append(s.pending, &lagSample{want: b[i].State(), ackedAt: ackedAt})
	}
}

func (s *lagSampler) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// finish tells poll to return once no sample is pending.
func (s *lagSampler) finish() { s.finOnce.Do(func() { close(s.finishing) }) }

// poll checks pending samples every PollInterval until ctx ends, or until
// finish was called and nothing is pending.
func (s *lagSampler) poll(ctx context.Context) {
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		round := append([]*lagSample(nil), s.pending...)
		s.mu.Unlock()
		if len(round) == 0 {
			select {
			case <-s.finishing:
				return
			default:
				continue
			}
		}
		sem := make(chan struct{}, readParallelism)
		var wg sync.WaitGroup
		for _, smp := range round {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				s.check(ctx, smp)
			}()
		}
		wg.Wait()
		s.mu.Lock()
		kept := s.pending[:0]
		for _, smp := range s.pending {
			if !smp.done {
				kept = append(kept, smp)
			}
		}
		clear(s.pending[len(kept):])
		s.pending = kept
		s.mu.Unlock()
	}
}

// check reads one sample's key; it marks the sample done when the store
// covers it (recording the lag) or when it timed out.
func (s *lagSampler) check(ctx context.Context, smp *lagSample) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	k := smp.want.Key
	states, err := s.cfg.Get(rctx, k.User, []string{k.Channel})
	now := time.Now()
	if err != nil {
		s.errors.Add(1)
	}
	for _, st := range states {
		if st.Key == k && st.Covers(smp.want) {
			s.hist.Record(now.Sub(smp.ackedAt))
			s.mu.Lock()
			smp.done = true
			s.mu.Unlock()
			return
		}
	}
	if now.Sub(smp.ackedAt) > s.cfg.Timeout {
		s.mu.Lock()
		smp.done = true
		s.timedOut++
		s.mu.Unlock()
	}
}

func (s *lagSampler) result() LagResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return LagResult{
		Percentiles: s.hist.Percentiles(),
		TimedOut:    s.timedOut,
		Skipped:     s.skipped,
		Unfinished:  len(s.pending),
		Errors:      int(s.errors.Load()),
	}
}
