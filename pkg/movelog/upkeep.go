// Package movelog keeps the cursor-move log's weekly partitions
// (cursor_moves, readby.Store.MaintainMovePartitions): a lifecycle component,
// run beside the persister, that creates them ahead and drops them whole
// past the retention — once at start on every replica (serialized in
// Postgres, so the first windows find their partition), then every hour on
// the one replica that leads (pkg/leader).
package movelog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/leader"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/views/readby"
)

// Defaults.
const (
	// AheadDefault is how far past now partitions exist: a leader lost
	// for days still leaves the windows somewhere to write.
	AheadDefault = 14 * 24 * time.Hour
	// EveryDefault is the pause between the leader's passes.
	EveryDefault = time.Hour
	// LeaderCheckIntervalDefault is how often the leader checks its lock's
	// session and a standby tries to take the lock: every persister
	// replica but one stands by, each trying on a fresh connection, and an
	// hourly job needs no faster handover.
	LeaderCheckIntervalDefault = time.Minute
	// LockName names the Postgres advisory lock of the upkeep's leader.
	LockName = "cursor-moves-maintenance"
)

// Config configures an Upkeep.
type Config struct {
	// Postgres holds the log and the leader's lock. Required.
	Postgres *pgstore.Store
	// Retention is how long the log keeps moves: partitions that end
	// before now−Retention are dropped. Required (the persister's
	// MoveRetention, --receipts-log-retention).
	Retention time.Duration
	// Ahead defaults to AheadDefault.
	Ahead time.Duration
	// Every defaults to EveryDefault.
	Every time.Duration
	// LeaderCheckInterval defaults to LeaderCheckIntervalDefault.
	LeaderCheckInterval time.Duration
	// Now is the clock that places the partitions. Defaults to time.Now.
	Now func() time.Time
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// Upkeep is the partition upkeep component (Run, Ready, Status).
type Upkeep struct {
	cfg     Config
	log     *zap.Logger
	leader  *leader.Loop
	running atomic.Bool
	// lastPass is when this replica last passed (the real clock: it spaces
	// the passes, whatever Now says); lastErr why that pass failed.
	lastPass atomic.Int64
	lastErr  atomic.Pointer[error]
}

// New checks the config.
func New(cfg Config) (*Upkeep, error) {
	cfg.Ahead = cmp.Or(cfg.Ahead, AheadDefault)
	cfg.Every = cmp.Or(cfg.Every, EveryDefault)
	cfg.LeaderCheckInterval = cmp.Or(cfg.LeaderCheckInterval, LeaderCheckIntervalDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	var errs []error
	if cfg.Postgres == nil {
		errs = append(errs, errors.New("Postgres is required"))
	}
	if cfg.Retention <= 0 || cfg.Ahead < 0 || cfg.Every < 0 || cfg.LeaderCheckInterval < 0 {
		errs = append(errs, errors.New("Retention, Ahead, Every and LeaderCheckInterval must be > 0"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("configuring the move-log upkeep: %w", err)
	}
	u := &Upkeep{cfg: cfg, log: cfg.Logger.Named("movelog")}
	var err error
	u.leader, err = leader.New(leader.Config{Postgres: cfg.Postgres, Lock: LockName, CheckInterval: cfg.LeaderCheckInterval,
		Name: "move-log upkeep", Logger: u.log})
	if err != nil {
		return nil, fmt.Errorf("configuring the move-log upkeep: %w", err)
	}
	return u, nil
}

// Run passes once at once, then every Every while this replica leads,
// until ctx ends.
func (u *Upkeep) Run(ctx context.Context) error {
	u.running.Store(true)
	defer u.running.Store(false)
	_, _, _ = u.Pass(ctx)
	u.leader.Run(ctx, u.lead)
	return nil
}

// lead passes every Every (counted from this replica's last pass) while
// this replica leads.
func (u *Upkeep) lead(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		t.Reset(max(0, u.cfg.Every-time.Since(time.Unix(0, u.lastPass.Load()))))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if u.leader.Check(ctx) != nil {
			return
		}
		_, _, _ = u.Pass(ctx)
	}
}

// Pass creates the partitions from the one holding Now()−Retention to
// Now()+Ahead and drops the older ones, logging what it did or why it
// failed. It is safe beside another replica's pass.
func (u *Upkeep) Pass(ctx context.Context) (created, dropped []string, err error) {
	created, dropped, err = readby.NewStore(u.cfg.Postgres, nil).MaintainMovePartitions(ctx, u.cfg.Now(), u.cfg.Retention, u.cfg.Ahead)
	u.lastPass.Store(time.Now().UnixNano())
	switch {
	case err != nil:
		if ctx.Err() == nil {
			u.lastErr.Store(&err)
			u.log.Warn("maintaining the cursor-move log partitions", zap.Error(err))
		}
	case len(created)+len(dropped) > 0:
		u.lastErr.Store(nil)
		u.log.Info("cursor-move log partitions", zap.Strings("created", created), zap.Strings("dropped", dropped))
	default:
		u.lastErr.Store(nil)
	}
	return created, dropped, err
}

// Ready reports nil while Run runs: a failed pass is retried an hour later
// and partitions exist two weeks ahead, so it never holds the persister
// back (Status tells).
func (u *Upkeep) Ready(context.Context) error {
	if !u.running.Load() {
		return errors.New("move-log upkeep not running")
	}
	return nil
}

// Status says whether this replica leads the upkeep, and why its last
// pass failed (the admin port's /readyz shows it).
func (u *Upkeep) Status() string {
	var parts []string
	switch u.leader.Role() {
	case leader.Leader:
		parts = append(parts, "leader (holds the Postgres advisory lock)")
	case leader.Standby:
		parts = append(parts, "standby (another replica leads)")
	}
	if err := u.lastErr.Load(); err != nil {
		parts = append(parts, fmt.Sprintf("last pass failed: %v", *err))
	}
	return strings.Join(parts, "; ")
}
