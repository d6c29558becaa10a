// Package leader runs a job on one replica at a time: the replica holding a
// Postgres session-level advisory lock (pgstore.TryAdvisoryLock, on a
// connection of its own) leads for as long as that lock's session lives;
// the others stand by and try to take the lock every check interval. The
// leader checks its session every interval and whenever the job asks
// (Loop.Check, before each page of work), and a lost session cancels the
// job at once. Without a store there is no election: the job runs at once,
// for as long as the loop does.
//
// The drift sweep (pkg/drift) and the move-log partition upkeep
// (pkg/movelog) are its users.
package leader

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/pgstore"
)

// CheckIntervalDefault is how often a leader checks that its lock's session
// is alive, and a standby tries to take the lock.
const CheckIntervalDefault = 2 * time.Second

// Role is what a Loop does now.
type Role string

// Roles.
const (
	// None: the loop is not running.
	None Role = ""
	// Leader: the loop holds the lock (or there is no election) and runs
	// the job.
	Leader Role = "leader"
	// Standby: another replica holds the lock, or it cannot be tried.
	Standby Role = "standby"
)

// Config configures a Loop.
type Config struct {
	// Postgres holds the lock. Nil turns the election off: the loop leads
	// at once, for as long as it runs.
	Postgres *pgstore.Store
	// Lock names the advisory lock (scoped to the store's schema by
	// TryAdvisoryLock). Required with Postgres.
	Lock string
	// CheckInterval is how often the leader checks its lock's session and
	// a standby tries to take the lock; a leader whose session was lost
	// waits twice as long before trying again. Defaults to
	// CheckIntervalDefault.
	CheckInterval time.Duration
	// Name names the job in log lines ("drift sweep").
	Name string
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Gauge, when set, is 1 while the loop leads, 0 otherwise.
	Gauge prometheus.Gauge
	// OnRole, when set, hears each change of role, before the job starts
	// (Leader) or after it was told to stop (Standby, None).
	OnRole func(Role)
}

// Loop is the leader loop of one job on one replica.
type Loop struct {
	cfg  Config
	log  *zap.Logger
	role atomic.Value // Role
	// check is set while leading under a lock: the session check.
	check atomic.Pointer[func(context.Context) error]
}

// New checks the config and returns a loop.
func New(cfg Config) (*Loop, error) {
	cfg.CheckInterval = cmp.Or(cfg.CheckInterval, CheckIntervalDefault)
	if cfg.CheckInterval < 0 {
		return nil, errors.New("leader: CheckInterval must be > 0")
	}
	if cfg.Postgres != nil && cfg.Lock == "" {
		return nil, errors.New("leader: Lock is required with Postgres")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	l := &Loop{cfg: cfg, log: cfg.Logger}
	l.role.Store(None)
	return l, nil
}

// Elected reports whether the loop leads only under the lock.
func (l *Loop) Elected() bool { return l.cfg.Postgres != nil }

// Role is what the loop does now.
func (l *Loop) Role() Role { return l.role.Load().(Role) }

// setRole records role (and the gauge); it reports whether it changed.
func (l *Loop) setRole(role Role) bool {
	if l.cfg.Gauge != nil {
		if role == Leader {
			l.cfg.Gauge.Set(1)
		} else {
			l.cfg.Gauge.Set(0)
		}
	}
	changed := l.role.Swap(role).(Role) != role
	if changed && l.cfg.OnRole != nil {
		l.cfg.OnRole(role)
	}
	return changed
}

// Check returns nil while this replica may run the job: it leads under a
// lock whose session answers, or there is no election. A lost session
// cancels the job (its context ends) and makes the loop a standby. Jobs
// call it before each unit of work (a page), so a leader whose lock
// another replica may already hold stops within one unit.
func (l *Loop) Check(ctx context.Context) error {
	if c := l.check.Load(); c != nil {
		return (*c)(ctx)
	}
	return nil
}

// Run runs job while this replica leads, until ctx ends. Without an
// election job runs once, with ctx. With one, the loop tries the lock every
// CheckInterval; holding it, it runs job with a context that ends when the
// lock's session is lost (or ctx ends), then releases the lock and, a
// standby again, waits two intervals before trying again: its link to
// Postgres is the suspect one, so another replica should take over first.
// A job that returns early while leading is treated the same way.
func (l *Loop) Run(ctx context.Context, job func(ctx context.Context)) {
	defer l.setRole(None)
	if !l.Elected() {
		l.setRole(Leader)
		job(ctx)
		return
	}
	wait := l.cfg.CheckInterval
	for ctx.Err() == nil {
		lock, ok, err := l.cfg.Postgres.TryAdvisoryLock(ctx, l.cfg.Lock)
		switch {
		case ctx.Err() != nil:
			if lock != nil {
				l.release(ctx, lock)
			}
		case err != nil:
			if l.setRole(Standby) {
				l.log.Warn(l.cfg.Name+" standing by: cannot try the leader lock", zap.Error(err))
			}
		case !ok:
			if l.setRole(Standby) {
				l.log.Info(l.cfg.Name + " standing by: another replica leads")
			}
		default:
			l.setRole(Leader)
			l.log.Info(l.cfg.Name+" leader: this replica leads", zap.Uint32("lock_pid", lock.PID()))
			l.lead(ctx, lock, job)
			wait = 2 * l.cfg.CheckInterval
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = l.cfg.CheckInterval
	}
}

// lead runs job while lock's session lives and ctx lasts, then releases
// the lock. The session is checked every CheckInterval and at each Check.
func (l *Loop) lead(ctx context.Context, lock *pgstore.AdvisoryLock, job func(context.Context)) {
	leadCtx, cancel := context.WithCancel(ctx)
	check := func(ctx context.Context) error {
		if err := lock.Check(ctx); err != nil {
			if leadCtx.Err() == nil {
				l.log.Warn(l.cfg.Name+" leader lock lost; stopping", zap.Error(err))
				l.setRole(Standby)
				cancel()
			}
			return err
		}
		return nil
	}
	l.check.Store(&check)
	defer l.check.Store(nil)
	var watch sync.WaitGroup
	watch.Go(func() {
		t := time.NewTicker(l.cfg.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-leadCtx.Done():
				return
			case <-t.C:
			}
			cctx, ccancel := context.WithTimeout(leadCtx, l.cfg.CheckInterval)
			err := check(cctx)
			ccancel()
			if err != nil {
				return
			}
		}
	})
	job(leadCtx)
	if leadCtx.Err() == nil && ctx.Err() == nil {
		// The job ended on its own: step back as after a loss.
		l.setRole(Standby)
	}
	cancel()
	watch.Wait()
	l.release(ctx, lock)
}

// release unlocks within a check interval, even after ctx ended.
func (l *Loop) release(ctx context.Context, lock *pgstore.AdvisoryLock) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.CheckInterval)
	defer cancel()
	lock.Release(rctx)
}
