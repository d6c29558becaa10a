package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-retry"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/backoff"
)

// Func adapts a run function and an optional readiness check to a
// Component; a nil ready is ready while run runs.
func Func(run func(context.Context) error, ready func(context.Context) error) Component {
	return &funcComponent{run: run, ready: ready}
}

type funcComponent struct {
	run     func(context.Context) error
	ready   func(context.Context) error
	running atomic.Bool
}

func (f *funcComponent) Run(ctx context.Context) error {
	f.running.Store(true)
	defer f.running.Store(false)
	return f.run(ctx)
}

func (f *funcComponent) Ready(ctx context.Context) error {
	if !f.running.Load() {
		return errors.New("not running")
	}
	if f.ready != nil {
		return f.ready(ctx)
	}
	return nil
}

// Once is a component that does one job in the background (say, a
// migration the binary does not wait for) and is always ready: it returns
// nil when the job succeeds or ctx ends, and the job's error otherwise,
// which stops the binary.
func Once(job func(context.Context) error) Component {
	return &once{job: job}
}

type once struct{ job func(context.Context) error }

func (o *once) Run(ctx context.Context) error {
	if err := o.job(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func (*once) Ready(context.Context) error { return nil }

// WaitBackoff spaces the attempts of WhileUnavailable.
var WaitBackoff = backoff.Config{Base: 500 * time.Millisecond, Cap: 10 * time.Second}

// WhileUnavailable runs op until it succeeds, retrying (with WaitBackoff)
// for as long as unavailable(err) says the dependency cannot be reached (a
// pod may start before its database); any other error ends it at once.
// onWait, when set, hears each failed attempt.
func WhileUnavailable(ctx context.Context, op func(context.Context) error, unavailable func(error) bool, onWait func(error)) error {
	return retry.Do(ctx, WaitBackoff.New(), func(ctx context.Context) error {
		err := op(ctx)
		if err == nil || !unavailable(err) {
			return err
		}
		if onWait != nil {
			onWait(err)
		}
		return retry.RetryableError(err)
	})
}

// DefaultTelemetry fills a component config's logger (a no-op one) and
// metrics registerer (a private registry, never the global one) when unset.
func DefaultTelemetry(log **zap.Logger, reg *prometheus.Registerer) {
	if *log == nil {
		*log = zap.NewNop()
	}
	if *reg == nil {
		*reg = prometheus.NewRegistry()
	}
}

// Dependency is something a component's readiness depends on.
type Dependency struct {
	Name string
	Ping func(context.Context) error
}

// Ping pings each dependency and returns one error per failure, naming it.
func Ping(ctx context.Context, deps ...Dependency) []error {
	var errs []error
	for _, d := range deps {
		if err := d.Ping(ctx); err != nil {
			errs = append(errs, fmt.Errorf("pinging %s: %w", d.Name, err))
		}
	}
	return errs
}
