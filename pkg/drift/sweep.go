// Package drift is the dlt-reconciler's drift sweep: it walks Postgres and
// Redis in bounded, rate-limited pages, counts disagreements by direction
// and repairs them both ways. Every write it makes is a max-merge, so a
// repair can never move a key backwards.
package drift

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/leader"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/parked"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/views/readby"
)

// Defaults.
const (
	// IntervalDefault is the pause between the end of one sweep and
	// the start of the next.
	IntervalDefault = time.Minute
	// PageSizeDefault is the number of Postgres rows per page.
	PageSizeDefault = 500
	// PagesPerSecondDefault limits pages (Postgres pages and Redis SCAN
	// pages together) per second, so a sweep never competes with the
	// write path for long.
	PagesPerSecondDefault = 20.0
	// ScanCountDefault is the COUNT hint of one Redis SCAN page: SCAN
	// walks every key of a shared Redis, not only ours, so pages must be
	// large enough that the walk of a big keyspace takes seconds, not minutes.
	ScanCountDefault = 1000
	// GraceDefault: a key whose Redis value moved more recently than
	// this is in flight (written to Redis, not yet persisted), not drift.
	GraceDefault = 30 * time.Second
	// LeaderCheckIntervalDefault is how often the leader checks that its
	// lock's session is alive, and a standby tries to take the lock.
	LeaderCheckIntervalDefault = leader.CheckIntervalDefault
	// LockName names the Postgres advisory lock of the sweep's leader.
	LockName = "receipts.drift_sweep"
	// MetricsSubsystem names the sweep's metrics (receipts_reconciler_…).
	MetricsSubsystem = "reconciler"
	metricsNamespace = "receipts"
	// pgPageChunk bounds the keys of one Postgres lookup of a Redis page.
	pgPageChunk = 5000
)

// Leader election modes (Config.LeaderElection, --sweep-leader-election).
const (
	// LeaderNone: every replica sweeps (harmless: repairs are max-merges,
	// but the work and the load are multiplied).
	LeaderNone = "none"
	// LeaderPostgres: the replica holding a Postgres session-level
	// advisory lock sweeps; the others stand by and take over when its
	// session ends.
	LeaderPostgres = "postgres"
	// LeaderLease would be a Kubernetes Lease; it is not implemented.
	LeaderLease = "lease"
)

// LeaderElections are the modes New accepts.
var LeaderElections = []string{LeaderPostgres, LeaderNone}

// Directions of drift: the values of the "direction" label and the fields
// of Counts.
const (
	// DirRedisAhead: Redis holds a greater cursor; Postgres is upserted.
	DirRedisAhead = "redis_ahead"
	// DirPostgresAhead: Postgres holds a greater cursor; Redis is merged.
	DirPostgresAhead = "postgres_ahead"
	// DirRedisMissing: Postgres has the key, Redis has no field for it;
	// Redis is merged.
	DirRedisMissing = "redis_missing"
	// DirPostgresMissing: Redis has the key, Postgres has no row; Postgres
	// is upserted.
	DirPostgresMissing = "postgres_missing"
)

// Counts holds one number per direction of drift.
type Counts struct {
	RedisAhead      int
	PostgresAhead   int
	RedisMissing    int
	PostgresMissing int
}

func (c *Counts) add(dir string, n int) {
	switch dir {
	case DirRedisAhead:
		c.RedisAhead += n
	case DirPostgresAhead:
		c.PostgresAhead += n
	case DirRedisMissing:
		c.RedisMissing += n
	case DirPostgresMissing:
		c.PostgresMissing += n
	}
}

func (c *Counts) merge(o Counts) {
	c.RedisAhead += o.RedisAhead
	c.PostgresAhead += o.PostgresAhead
	c.RedisMissing += o.RedisMissing
	c.PostgresMissing += o.PostgresMissing
}

// Total is the sum over all directions.
func (c Counts) Total() int {
	return c.RedisAhead + c.PostgresAhead + c.RedisMissing + c.PostgresMissing
}

// Report is the outcome of one full sweep.
type Report struct {
	Started  time.Time
	Duration time.Duration
	// PostgresRows is the number of rows walked in Postgres, every kind.
	PostgresRows int
	// RedisUsers counts the ids the Redis walks scanned (users, channels,
	// keys: each kind's SCAN names its own), RedisFields the values read.
	RedisUsers  int
	RedisFields int
	// Pages counts Postgres pages and Redis SCAN pages.
	Pages int
	// ReadWhole counts the values of kinds swept by digest (large sets)
	// whose digests differed, so the pass read them whole.
	ReadWhole int
	// Found counts disagreements by direction; Repaired the ones whose
	// repair was written. Both cover every kind of state.
	Found    Counts
	Repaired Counts
	// ByKind splits Found by kind of state (kind.Kind.Name: KindCursors,
	// KindHeads, ...).
	ByKind map[string]*Counts
	// InFlight counts keys where Redis was ahead but moved within the grace
	// period: the write path is still persisting them, so they were left.
	InFlight int
	// Invalid counts Redis fields that fail validation; they are never
	// copied into Postgres.
	Invalid int
	// Erased counts repairs not written because their user was erased
	// after (or may have been erased after) the state they would copy.
	Erased int
	// Failed counts repairs that could not be written.
	Failed int
	// ErasuresFinished counts the channels of erasures cut short that the
	// pass cleaned (redisstore.FinishErasures).
	ErasuresFinished int
	// Samples are the first disagreements found (at most MaxSamples):
	// enough for an operator, or a test, to see which keys drift and how.
	Samples []Sample
}

// MaxSamples bounds Report.Samples.
const MaxSamples = 5

// Sample is one disagreement as the sweep found it, each value formatted
// with %+v ("<nil>": the store holds none).
type Sample struct {
	Kind, Direction, Key string
	Postgres, Redis      string
}

// Config configures a Sweeper.
type Config struct {
	// Postgres is the durable store. Required.
	Postgres *pgstore.Store
	// Redis is the real-time view. Required.
	Redis *redisstore.Store
	// Interval is the pause between sweeps of Run. Defaults to
	// IntervalDefault.
	Interval time.Duration
	// PageSize is the number of Postgres rows per page. Defaults to
	// PageSizeDefault.
	PageSize int
	// PagesPerSecond limits the page rate. Defaults to
	// PagesPerSecondDefault.
	PagesPerSecond float64
	// ScanCount is the COUNT hint of a Redis SCAN page. Defaults to
	// ScanCountDefault.
	ScanCount int64
	// Grace leaves keys alone whose Redis value moved within it (in-flight
	// writes). Defaults to GraceDefault; negative disables it.
	Grace time.Duration
	// LeaderElection makes Run sweep only on the replica that leads:
	// LeaderPostgres (an advisory lock on a dedicated connection) or
	// LeaderNone (the default here: every Run sweeps).
	LeaderElection string
	// LeaderCheckInterval is how often the leader checks its lock's
	// session (a lost session stops its sweep) and a standby tries to take
	// the lock. Defaults to LeaderCheckIntervalDefault.
	LeaderCheckInterval time.Duration
	// MentionCap is the mention cap (each key keeps its newest cap+1).
	// Defaults to channel.MentionCapDefault.
	MentionCap int
	// Kinds are the kinds of state swept, in order. Defaults to
	// kinds.All().
	Kinds []kind.Kind
	// DryRun finds and counts drift but repairs nothing: a check that
	// both stores agree on every kind (the fault suite's).
	DryRun bool
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
}

// RegisterFlagsWithPrefix registers the sweep's page flags as
// <prefix>page-size, <prefix>pages-per-second, <prefix>scan-count and
// <prefix>grace, with the defaults for zero fields. Interval is the
// caller's, since only a running service sweeps repeatedly.
func (c *Config) RegisterFlagsWithPrefix(prefix string, fs *flag.FlagSet) {
	c.fill()
	fs.IntVar(&c.PageSize, prefix+"page-size", c.PageSize, "Postgres rows per sweep page")
	fs.Float64Var(&c.PagesPerSecond, prefix+"pages-per-second", c.PagesPerSecond, "sweep page rate limit (Postgres pages and Redis SCAN pages together)")
	fs.Int64Var(&c.ScanCount, prefix+"scan-count", c.ScanCount, "COUNT hint of one Redis SCAN page")
	fs.DurationVar(&c.Grace, prefix+"grace", c.Grace, "keys whose Redis value moved more recently are in flight, not drift (negative: none)")
}

// fill sets every zero field to its default.
func (c *Config) fill() {
	c.PageSize = cmp.Or(c.PageSize, PageSizeDefault)
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	c.PagesPerSecond = cmp.Or(c.PagesPerSecond, PagesPerSecondDefault)
	c.ScanCount = cmp.Or(c.ScanCount, ScanCountDefault)
	c.Grace = cmp.Or(c.Grace, GraceDefault)
	c.LeaderElection = cmp.Or(c.LeaderElection, LeaderNone)
	c.LeaderCheckInterval = cmp.Or(c.LeaderCheckInterval, LeaderCheckIntervalDefault)
	if c.Kinds == nil {
		c.Kinds = kinds.All()
	}
	lifecycle.DefaultTelemetry(&c.Logger, &c.Registerer)
}

// validate reports every bad field at once.
func (c *Config) validate() error {
	var errs []error
	if c.Postgres == nil || c.Redis == nil {
		// The sweep compares the two stores: it needs both.
		errs = append(errs, errors.New("Postgres and Redis are both required"))
	}
	if c.Interval < 0 || c.PageSize < 0 || c.PagesPerSecond < 0 || c.ScanCount < 0 || c.LeaderCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("Interval, PageSize, PagesPerSecond, ScanCount and LeaderCheckInterval must be > 0"))
	}
	switch c.LeaderElection {
	case LeaderPostgres, LeaderNone:
	case LeaderLease:
		errs = append(errs, errors.New(`leader election "lease" (a Kubernetes Lease) is not implemented: use "postgres" (a Postgres advisory lock, no RBAC needed) or "none"`))
	default:
		errs = append(errs, fmt.Errorf("leader election %q: want one of %s", c.LeaderElection, strings.Join(LeaderElections, ", ")))
	}
	return errors.Join(errs...)
}

type sweepMetrics struct {
	found, repaired *prometheus.CounterVec
	sweeps          *prometheus.CounterVec
	duration        prometheus.Histogram
	inFlight        prometheus.Counter
	parkedPending   prometheus.Gauge
	leader          prometheus.Gauge
}

func newSweepMetrics(reg prometheus.Registerer) *sweepMetrics {
	f := promauto.With(reg)
	m := &sweepMetrics{
		found: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "drift_found_total",
			Help: "Keys where Redis and Postgres disagreed, by direction.",
		}, []string{"direction"}),
		repaired: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "drift_repaired_total",
			Help: "Disagreements repaired by a max-merge, by direction.",
		}, []string{"direction"}),
		sweeps: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "sweeps_total",
			Help: "Completed drift sweeps, by result (ok, error).",
		}, []string{"result"}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "sweep_duration_seconds",
			Help:    "Duration of one full drift sweep.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}),
		inFlight: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "drift_in_flight_total",
			Help: "Keys left alone because their Redis value moved within the grace period.",
		}),
		parkedPending: f.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "parked_pending",
			Help: "Parked dead letters not yet replayed (updated after each sweep).",
		}),
		leader: f.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "sweep_leader",
			Help: "1 while this replica runs the drift sweep (it leads, or leader election is off), 0 while it stands by.",
		}),
	}
	for _, d := range []string{DirRedisAhead, DirPostgresAhead, DirRedisMissing, DirPostgresMissing} {
		m.found.WithLabelValues(d)
		m.repaired.WithLabelValues(d)
	}
	m.sweeps.WithLabelValues("ok")
	m.sweeps.WithLabelValues("error")
	return m
}

// Sweeper compares Redis and Postgres and repairs both ways.
type Sweeper struct {
	cfg     Config
	log     *zap.Logger
	m       *sweepMetrics
	mu      sync.Mutex // one sweep at a time
	running atomic.Bool
	// lastErr is why the last sweep failed (nil after a good one): a sweep
	// that fails every time shows in readiness, not only in a counter.
	lastErr atomic.Pointer[error]
	// leader runs the sweeps on the replica that leads; its Check is the
	// guard before each page.
	leader *leader.Loop
	now    func() time.Time
	kinds  []kind.Kind
	env    kind.Env
	// ahead remembers, per key of a kind whose values carry no time
	// (mentions), when a pass first found Redis ahead of Postgres and the
	// last pass that did (pass counts SweepOnce calls): such a value is
	// repaired into Postgres only once it stayed ahead for Grace, as one
	// with a time is once that time is Grace old. Keys no pass finds ahead
	// any more are forgotten.
	aheadMu sync.Mutex
	ahead   map[string]aheadSince
	pass    uint64
}

// aheadSince is when a key was first found ahead with value, and the last
// pass that found it ahead.
type aheadSince struct {
	first time.Time
	value any
	pass  uint64
}

// The kinds of state, the keys of Report.ByKind.
var (
	KindCursors  = kinds.Cursors.Name()
	KindHeads    = kinds.Heads.Name()
	KindMembers  = kinds.Members.Name()
	KindMentions = kinds.Mentions.Name()
	KindSettings = kinds.Settings.Name()

	KindThreadHeads  = kinds.ThreadHeads.Name()
	KindThreadStates = kinds.ThreadStates.Name()

	KindNotifications = kinds.Notifications.Name()
	KindDeletions     = kinds.Deletions.Name()
	KindGroupMentions = kinds.GroupMentions.Name()
)

// checkGuard checks, before each page, that this replica may still sweep.
func (s *Sweeper) checkGuard(ctx context.Context) error { return s.leader.Check(ctx) }

// New validates the config.
func New(cfg Config) (*Sweeper, error) {
	cfg.fill()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring drift sweep: %w", err)
	}
	s := &Sweeper{cfg: cfg, log: cfg.Logger.Named("drift"), m: newSweepMetrics(cfg.Registerer), now: time.Now,
		kinds: cfg.Kinds, ahead: map[string]aheadSince{},
		env: kind.Env{Postgres: cfg.Postgres, Redis: cfg.Redis, MentionCap: cfg.MentionCap,
			SettingsApplied: readby.NewStore(cfg.Postgres, cfg.Redis).SettingsApplier(0)}}
	lc := leader.Config{CheckInterval: cfg.LeaderCheckInterval, Name: "drift sweep", Logger: s.log,
		Gauge: s.m.leader, OnRole: s.setRole}
	if cfg.LeaderElection == LeaderPostgres {
		lc.Postgres, lc.Lock = cfg.Postgres, LockName
	}
	var err error
	if s.leader, err = leader.New(lc); err != nil {
		return nil, fmt.Errorf("configuring drift sweep: %w", err)
	}
	return s, nil
}

// Run sweeps at start and then Interval after each sweep ends, until ctx
// ends. A failed sweep is logged and counted; the next one starts on time.
// With leader election it sweeps only while it holds the leader's lock
// (pkg/leader): it stands by (ready, receipts_reconciler_sweep_leader 0)
// while another replica holds it, tries to take it every
// LeaderCheckInterval, and stops sweeping at once when its own lock's
// session is lost.
func (s *Sweeper) Run(ctx context.Context) error {
	s.running.Store(true)
	defer s.running.Store(false)
	s.leader.Run(ctx, s.sweepLoop)
	return nil
}

// setRole hears the leader loop's role changes: a standby does not sweep,
// so a failure of its last leadership says nothing about it now.
func (s *Sweeper) setRole(role leader.Role) {
	if role != leader.Leader {
		s.lastErr.Store(nil)
	}
}

// Status says whether this replica leads the sweep or stands by (the
// admin port's /readyz shows it).
func (s *Sweeper) Status() string {
	switch s.leader.Role() {
	case leader.Leader:
		if s.leader.Elected() {
			return "leader (holds the Postgres advisory lock)"
		}
		return "sweeping (no leader election)"
	case leader.Standby:
		return "standby (another replica leads)"
	}
	return ""
}

// sweepLoop is Run's loop of sweeps, until ctx ends.
func (s *Sweeper) sweepLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := s.SweepOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		fields := []zap.Field{zap.Duration("duration", rep.Duration), zap.Int("postgres_rows", rep.PostgresRows),
			zap.Int("redis_users", rep.RedisUsers), zap.Int("found", rep.Found.Total()), zap.Int("repaired", rep.Repaired.Total()),
			zap.Int("in_flight", rep.InFlight), zap.Int("failed", rep.Failed)}
		if err != nil {
			s.lastErr.Store(&err)
		} else {
			s.lastErr.Store(nil)
		}
		switch {
		case err != nil:
			s.log.Warn("drift sweep failed", append(fields, zap.Error(err))...)
		case rep.Found.Total() > 0 || rep.Failed > 0 || rep.Invalid > 0:
			s.log.Info("drift sweep repaired disagreements", append(fields,
				zap.Int("redis_ahead", rep.Found.RedisAhead), zap.Int("postgres_ahead", rep.Found.PostgresAhead),
				zap.Int("redis_missing", rep.Found.RedisMissing), zap.Int("postgres_missing", rep.Found.PostgresMissing),
				zap.Int("invalid", rep.Invalid), zap.Int("erased", rep.Erased), zap.Any("by_kind", rep.ByKind),
				zap.Any("samples", rep.Samples))...)
		default:
			s.log.Debug("drift sweep found no disagreement", fields...)
		}
		if n, err := parked.New(s.cfg.Postgres).Count(ctx); err == nil {
			s.m.parkedPending.Set(float64(n))
		}
		t.Reset(s.cfg.Interval)
	}
}

// Ready reports nil while Run runs and both stores answer.
func (s *Sweeper) Ready(ctx context.Context) error {
	var errs []error
	if !s.running.Load() {
		errs = append(errs, errors.New("drift sweep not running"))
	}
	if last := s.lastErr.Load(); last != nil {
		errs = append(errs, fmt.Errorf("last drift sweep failed: %w", *last))
	}
	errs = append(errs, lifecycle.Ping(ctx, lifecycle.Dependency{Name: "postgres", Ping: s.cfg.Postgres.Ping},
		lifecycle.Dependency{Name: "redis", Ping: s.cfg.Redis.Ping})...)
	return errors.Join(errs...)
}
