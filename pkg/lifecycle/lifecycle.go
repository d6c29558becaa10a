// Package lifecycle runs a binary's long-running components under one
// contract: the admin port comes up first, dependencies are waited for,
// components start in order, the binary is ready only when every component
// is, and on SIGTERM (the end of the run's context) or the failure of any
// component they stop in reverse order within a deadline, every goroutine
// joined.
//
// It is our own small runner rather than oklog/run or dskit's services:
// oklog/run interrupts every actor at once (the API server must drain before
// the producer behind it closes) and knows nothing of readiness; dskit's
// services bring a state machine, a manager and their own dependencies for
// what is here about two hundred lines.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/admin"
)

// Component is a long-running part of a binary.
type Component interface {
	// Run does the component's work until ctx ends and returns nil after a
	// clean stop. An error stops the whole binary. A component whose work
	// is finished may return nil early; the others keep running.
	Run(ctx context.Context) error
	// Ready returns nil when the component can do its work, or why not.
	Ready(ctx context.Context) error
}

// Describer is a component that says what it is doing beyond ready or not
// (e.g. "standby"); /readyz prints it after "ready".
type Describer interface {
	Status() string
}

// Defaults.
const (
	// StopTimeoutDefault bounds the whole ordered stop.
	StopTimeoutDefault = 30 * time.Second
	// adminShutdownTimeout bounds the admin server's own shutdown, which
	// comes last.
	adminShutdownTimeout = 2 * time.Second
)

// ErrStopTimeout means a component did not return within the stop deadline.
var ErrStopTimeout = errors.New("component did not stop in time")

// Config configures a Runner.
type Config struct {
	// Admin is the admin port (metrics, health, readiness, pprof); its
	// Ready is set by the runner. An empty Admin.Addr disables it.
	Admin admin.Config
	// StopTimeout bounds the ordered stop of every component. Defaults to
	// StopTimeoutDefault.
	StopTimeout time.Duration
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

type dependency struct {
	name string
	wait func(context.Context) error
}

type member struct {
	name string
	c    Component
}

// Runner starts and stops one binary's components. Add dependencies and
// components, then call Run once.
type Runner struct {
	cfg     Config
	log     *zap.Logger
	deps    []dependency
	members []member

	mu        sync.Mutex
	phase     string // what the runner is doing while not running
	running   bool
	adminAddr string
}

// New returns a runner.
func New(cfg Config) *Runner {
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = StopTimeoutDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Runner{cfg: cfg, log: cfg.Logger.Named("lifecycle"), phase: "starting"}
}

// Wait adds a dependency: wait runs after the admin port is up and before
// any component starts, in the order added; /readyz names it meanwhile. An
// error from it ends Run with that error.
func (r *Runner) Wait(name string, wait func(context.Context) error) {
	r.deps = append(r.deps, dependency{name: name, wait: wait})
}

// Add adds a component; components start in the order added and stop in
// the reverse order.
func (r *Runner) Add(name string, c Component) {
	r.members = append(r.members, member{name: name, c: c})
}

// Ready is the binary's readiness: every component ready once all have
// started; otherwise what the runner is doing.
func (r *Runner) Ready(ctx context.Context) error {
	r.mu.Lock()
	running, phase := r.running, r.phase
	r.mu.Unlock()
	if !running {
		return errors.New(phase)
	}
	var errs []error
	for _, m := range r.members {
		if err := m.c.Ready(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
		}
	}
	return errors.Join(errs...)
}

// Status lists "name: status" for every component that describes itself
// (Describer) with a non-empty status, in the order added.
func (r *Runner) Status() []string {
	var out []string
	for _, m := range r.members {
		if d, ok := m.c.(Describer); ok {
			if st := d.Status(); st != "" {
				out = append(out, m.name+": "+st)
			}
		}
	}
	return out
}

// AdminAddr is the admin port's bound address ("" before Run binds it):
// with Admin.Addr "127.0.0.1:0", the port the system chose.
func (r *Runner) AdminAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adminAddr
}

func (r *Runner) setPhase(phase string, running bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase, r.running = phase, running
}

// Run serves the admin port, waits for the dependencies, starts the
// components and runs until ctx ends or a component fails; then it stops
// the components in reverse order and the admin port last. It returns nil
// after a clean stop by ctx, else every error (a failed dependency or
// component, a component that outlived the stop deadline).
func (r *Runner) Run(ctx context.Context) error {
	stopAdmin, err := r.serveAdmin()
	if err != nil {
		return err
	}
	defer stopAdmin()

	for _, d := range r.deps {
		r.setPhase("waiting for "+d.name, false)
		if err := d.wait(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("waiting for %s: %w", d.name, err)
		}
	}
	if ctx.Err() != nil {
		return nil
	}

	type started struct {
		cancel context.CancelFunc
		done   chan struct{}
		err    error
	}
	runs := make([]*started, len(r.members))
	failed := make(chan struct{}, len(r.members))
	for i, m := range r.members {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s := &started{cancel: cancel, done: make(chan struct{})}
		runs[i] = s
		go func() {
			defer close(s.done)
			s.err = m.c.Run(cctx)
			if s.err != nil && cctx.Err() == nil {
				r.log.Error("component failed; stopping", zap.String("component", m.name), zap.Error(s.err))
				failed <- struct{}{}
			}
		}()
	}
	r.setPhase("running", true)
	r.log.Debug("components started", zap.Int("num_components", len(r.members)))

	select {
	case <-ctx.Done():
	case <-failed:
	}
	r.setPhase("stopping", false)

	deadline := time.NewTimer(r.cfg.StopTimeout)
	defer deadline.Stop()
	var errs []error
	timedOut := false
	for i := len(runs) - 1; i >= 0; i-- {
		s, name := runs[i], r.members[i].name
		s.cancel()
		if timedOut {
			continue
		}
		select {
		case <-s.done:
			if s.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, s.err))
			}
		case <-deadline.C:
			timedOut = true
			errs = append(errs, fmt.Errorf("%s: %w (%s)", name, ErrStopTimeout, r.cfg.StopTimeout))
		}
	}
	if timedOut {
		// Components not yet joined were cancelled; they are not waited for:
		// the process is about to exit and one of them is stuck.
		r.log.Error("stopping timed out", zap.Duration("stop_timeout", r.cfg.StopTimeout))
	}
	return errors.Join(errs...)
}

// serveAdmin binds the admin port (a bad address fails at once) and serves
// it; the returned func shuts it down and joins its goroutine.
func (r *Runner) serveAdmin() (func(), error) {
	if r.cfg.Admin.Addr == "" {
		return func() {}, nil
	}
	ac := r.cfg.Admin
	ac.Ready, ac.Status = r.Ready, r.Status
	ln, err := net.Listen("tcp", ac.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on admin address %s: %w", ac.Addr, err)
	}
	srv := &http.Server{Handler: admin.Handler(ac), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("admin server stopped", zap.Error(err))
		}
	}()
	r.mu.Lock()
	r.adminAddr = ln.Addr().String()
	r.mu.Unlock()
	r.log.Info("admin serving", zap.String("addr", ln.Addr().String()))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}
