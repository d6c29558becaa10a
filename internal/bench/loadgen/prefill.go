package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Prefill bounds.
const (
	PrefillBatchDefault   = 2000
	PrefillWorkersDefault = 4
	// PrefillMaxStates bounds one prefill (about 0.6 GB of Redis at the
	// cursor layout's ~52 bytes per state plus its key overhead).
	PrefillMaxStates = 50_000_000
)

// PrefillConfig describes the state written before a run, so the gateway
// can be measured against a Redis that already holds many users' state
// (the cost-growth pair of scripts/bench.sh).
type PrefillConfig struct {
	// Users is how many users get state; each has Channels channels, so
	// Users*Channels states are written.
	Users    int
	Channels int
	// UserPrefix starts the users' ids (keep it apart from the run's own
	// users: these keys are only there to make Redis large).
	UserPrefix string
	// Batch is the states of one pipeline; Workers the pipelines in flight.
	Batch, Workers int
	// Progress, if set, is called with the states written so far about
	// once a second.
	Progress func(written int64)
	// Also, if set, writes each batch a second time after Redis took it:
	// into Postgres, so that the stores agree as in production and the
	// drift sweep does not spend the measured run repairing a Postgres
	// that lacks them.
	Also func(ctx context.Context, states []receipt.State) error
}

func (c PrefillConfig) validate() error {
	switch {
	case c.Users < 1 || c.Channels < 1:
		return errors.New("prefill: users and channels must be >= 1")
	case int64(c.Users)*int64(c.Channels) > PrefillMaxStates:
		return fmt.Errorf("prefill: %d users x %d channels is over the bound of %d states", c.Users, c.Channels, PrefillMaxStates)
	case c.UserPrefix == "":
		return errors.New("prefill: a user prefix is required")
	case c.Batch < 1 || c.Workers < 1:
		return errors.New("prefill: batch and workers must be >= 1")
	}
	return nil
}

// PrefillResult is what a prefill wrote.
type PrefillResult struct {
	States  int64
	Elapsed time.Duration
}

// Prefill writes cfg.Users*cfg.Channels read + delivered states into the
// store with the gateway's own merge (so the layout is the production one),
// cfg.Workers pipelines of cfg.Batch states at a time. It is idempotent:
// the same config writes the same states again.
func Prefill(ctx context.Context, store *redisstore.Store, cfg PrefillConfig) (PrefillResult, error) {
	if cfg.Batch == 0 {
		cfg.Batch = PrefillBatchDefault
	}
	if cfg.Workers == 0 {
		cfg.Workers = PrefillWorkersDefault
	}
	if err := cfg.validate(); err != nil {
		return PrefillResult{}, err
	}
	start := time.Now()
	total := int64(cfg.Users) * int64(cfg.Channels)
	var next, written atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			states := make([]receipt.State, 0, cfg.Batch)
			for ctx.Err() == nil {
				from := next.Add(int64(cfg.Batch)) - int64(cfg.Batch)
				if from >= total {
					return
				}
				states = states[:0]
				for i := from; i < min(from+int64(cfg.Batch), total); i++ {
					states = append(states, prefillState(cfg, i))
				}
				res, err := cursors.NewStore(store).Merge(ctx, states)
				if err == nil {
					for _, r := range res {
						if r.Err != nil {
							err = r.Err
							break
						}
					}
				}
				if err == nil && cfg.Also != nil {
					err = cfg.Also(ctx, states)
				}
				if err != nil {
					cancel(fmt.Errorf("prefill: writing states %d..%d: %w", from, from+int64(len(states)), err))
					return
				}
				written.Add(int64(len(states)))
			}
		})
	}
	if cfg.Progress != nil {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		tick := time.NewTicker(time.Second)
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-tick.C:
				cfg.Progress(written.Load())
			}
		}
		tick.Stop()
	}
	wg.Wait()
	res := PrefillResult{States: written.Load(), Elapsed: time.Since(start)}
	if err := context.Cause(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// prefillState is the i-th state: user i/Channels, channel i%Channels,
// read and delivered at a seq derived from i.
func prefillState(cfg PrefillConfig, i int64) receipt.State {
	u, c := i/int64(cfg.Channels), i%int64(cfg.Channels)
	seq := 1 + i%997
	cur := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}
	return receipt.State{
		Key:       receipt.Key{User: cfg.UserPrefix + strconv.FormatInt(u, 10), Channel: "c" + strconv.FormatInt(c, 10)},
		Read:      cur,
		Delivered: cur,
		DeviceID:  "d0",
	}
}
