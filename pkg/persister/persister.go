package persister

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/thread"
)

// Persister is one consumer-group member writing the topic to Postgres.
// Build it with New, run it with Run, and Close it after Run returns.
type Persister struct {
	// env is what the kinds' statements run against.
	env *kind.Env
	// feed is the window's change feed being written (nil: none); the
	// thread registers' statements add their moves to it.
	feed     atomic.Pointer[changeSink]
	cfg      Config
	log      *zap.Logger
	m        *metrics
	store    *pgstore.Store
	ownStore bool
	cl       *kgo.Client
	tracer   trace.Tracer
	lag      *LagExporter // nil when LagInterval < 0
	// written lets a row that cannot advance Postgres skip its write.
	written *written
	// wcap paces the rows written (nil: no MaxWriteRate).
	wcap *writeCap
	// askRowsUntil (unix ns): until then, a bulk statement asks Postgres
	// which keys have a row instead of taking the written cache's word; set
	// when a guess missed (upsertBulk).
	askRowsUntil atomic.Int64

	// blocked receives a signal when a rebalance waits on us
	// (OnPartitionsCallbackBlocked): the window in hand is cut, every
	// window is settled, and only then is the rebalance allowed.
	blocked chan struct{}
	// cancelPoll, under mu, cuts the poll in progress short when a
	// rebalance waits on us: a poll waiting for records that do not come
	// would otherwise hold the rebalance until it times out.
	cancelPoll context.CancelFunc
	// windows hands a full (or lingered) window from the poller to the
	// writer; unbuffered, so the poller knows when the writer is free and
	// keeps widening its window until then.
	windows chan handoff
	// rate is the consumed records/s the linger follows (fill only).
	rate rateMeter
	// inflight counts windows handed to the writer and not yet settled.
	inflight sync.WaitGroup
	// commitReq wakes the committer: settled offsets are waiting.
	commitReq chan struct{}

	started   atomic.Bool
	closeOnce sync.Once
	// onLinger, set only by tests, runs when a linger starts.
	onLinger func()
	// onTombstones, set only by tests, runs after a window's tombstone
	// lookup, before its rows are written, with the window's users.
	onTombstones func(users []string)

	// stmtLogs name the statement slot in the logs of its retry loop.
	stmtLogs []*zap.Logger

	mu      sync.Mutex
	running bool
	// outage holds, per operation (opUpsert, opDeadLetter), the retry
	// loops in progress and the last error of one; while it is non-empty
	// fetching is paused and Ready fails. Loops are counted because the
	// statements of a window retry concurrently: the outage ends only when
	// the last of them recovers.
	outage map[string]*outage
	// settled holds, per partition, the last record that is in Postgres or
	// acked on the dead-letter topic but whose offset is not yet committed.
	// The committer commits it; on revoke it is committed at once, and it
	// is dropped when the partition is lost.
	settled map[topicPartition]*kgo.Record
}

// New validates cfg, fills its defaults, opens the store (lazily: Postgres
// may be down) unless one is given, and creates the Kafka client, which
// starts joining the group.
func New(cfg Config) (*Persister, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := newPersister(cfg)
	if p.store == nil {
		if cfg.Tracing.Enabled() && cfg.Postgres.TracerProvider == nil {
			cfg.Postgres.TracerProvider = cfg.Tracing.Provider()
		}
		st, err := pgstore.Open(context.Background(), cfg.Postgres)
		if err != nil {
			return nil, fmt.Errorf("opening postgres: %w", err)
		}
		p.store, p.ownStore = st, true
		p.env.Postgres = st
	}
	// A writer waiting for a connection held by another would serialise
	// the statements, or stall them behind a slow one.
	if conns := int(p.store.Pool().Config().MaxConns); conns < cfg.Writers {
		if p.ownStore {
			p.store.Close()
		}
		return nil, fmt.Errorf("invalid persister config: the Postgres pool has %d connections, fewer than Writers %d", conns, cfg.Writers)
	}
	opts := append(cfg.Kafka.Opts(p.log, cfg.Registerer, MetricsSubsystem+"_kafka"),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Offsets are committed by hand, after the Postgres writes, and
		// rebalances wait until every window in hand is settled, so a
		// commit never lands on a partition this member no longer owns.
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(p.onRevoked),
		kgo.OnPartitionsLost(p.onLost),
		kgo.OnPartitionsCallbackBlocked(p.onBlocked),
		kgo.RecordDeliveryTimeout(cfg.DLTDeliveryTimeout),
		kgo.FetchMaxBytes(int32(cfg.FetchMaxBytes)),
		kgo.FetchMaxPartitionBytes(int32(cfg.FetchMaxPartitionBytes)),
		kgo.FetchMinBytes(int32(cfg.FetchMinBytes)),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
	)
	opts = append(opts, cfg.KafkaOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		if p.ownStore {
			p.store.Close()
		}
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	p.cl = cl
	if cfg.LagInterval > 0 {
		// Its own client (no metrics: the consumer's are the ones to watch).
		lagCl, err := kgo.NewClient(append(cfg.Kafka.Opts(p.log, nil, ""), cfg.KafkaOpts...)...)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("creating kafka client for the lag exporter: %w", err)
		}
		p.lag = newLagExporter(lagCl, cfg.Group, cfg.Topic, cfg.LagInterval, cfg.Registerer, p.log)
	}
	return p, nil
}

// newPersister builds a Persister on a filled, valid cfg, without its
// Kafka client, and with the store of cfg (nil when it is to be opened).
func newPersister(cfg Config) *Persister {
	p := &Persister{
		cfg:       cfg,
		log:       cfg.Logger.Named("persister"),
		m:         newMetrics(cfg.Registerer),
		store:     cfg.Store,
		written:   newWritten(cfg.WrittenCacheKeys),
		blocked:   make(chan struct{}, 1),
		windows:   make(chan handoff),
		commitReq: make(chan struct{}, 1),
		outage:    map[string]*outage{},
		settled:   map[topicPartition]*kgo.Record{},
		env:       &kind.Env{Postgres: cfg.Store, MentionCap: cfg.MentionCap},
		tracer:    cfg.Tracing.Provider().Tracer(tracerName),
	}
	if cfg.ChangesTopic != "" {
		p.env.UpsertThreadStates = func(ctx context.Context, vals []thread.State) (int64, error) {
			// Made here: New may open the Postgres store after this.
			ts := threads.NewStore(p.store, nil).WithMentionCap(p.env.MentionCap)
			if f := p.feed.Load(); f != nil {
				return f.upsertThreads(ts)(ctx, vals)
			}
			return ts.WriteStatesPG(ctx, vals)
		}
	}
	for i := range cfg.Writers {
		p.stmtLogs = append(p.stmtLogs, p.log.With(zap.Int("writer", i)))
	}
	p.wcap = newWriteCap(cfg.MaxWriteRate, cfg.StatementRows, p.m.throttled)
	return p
}

// Run consumes until ctx ends, then drains: the windows in hand are
// finished on a context detached from ctx and bounded by DrainTimeout,
// committed, and the group is left. It returns nil after a shutdown by ctx,
// or the error that stopped it (the client was closed). Run may be called
// once.
//
// Three stages overlap: the poller (this goroutine) polls, decodes and
// deduplicates into a window; the writer writes the previous window's
// rows to Postgres; the committer commits the offsets of windows already
// written. While the writer is busy, the poller widens its window, so under
// load a key marked many times costs one row per window, and windows grow
// to BatchRecords.
func (p *Persister) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("persister: Run called twice")
	}
	// The detail threshold and the mention cap are the gateway's too:
	// stored once, checked here.
	if err := p.retry(ctx, p.log, opUpsert, isUnavailable, func(ctx context.Context) error {
		if err := p.store.AgreeSetting(ctx, pgstore.SettingDetailThreshold, int64(p.cfg.DetailThreshold)); err != nil {
			return err
		}
		return p.store.AgreeSetting(ctx, pgstore.SettingMentionCap, int64(p.cfg.MentionCap))
	}); err != nil {
		return fmt.Errorf("persister: %w", err)
	}
	p.setRunning(true)
	defer p.setRunning(false)

	// procCtx outlives ctx by DrainTimeout, so a SIGTERM never throws away
	// a window that is one statement away from being written.
	procCtx, cancelProc := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelProc()
	stopDrainTimer := context.AfterFunc(ctx, func() { time.AfterFunc(p.cfg.DrainTimeout, cancelProc) })
	defer stopDrainTimer()

	p.log.Info("persister running", zap.String("topic", p.cfg.Topic), zap.String("group", p.cfg.Group),
		zap.String("dlt_topic", p.cfg.DLTTopic), zap.Int("batch_records", p.cfg.BatchRecords),
		zap.Int("statement_rows", p.cfg.StatementRows), zap.Duration("linger", p.cfg.Linger), zap.Int("writers", p.cfg.Writers))

	var stages sync.WaitGroup
	writerDone := make(chan struct{})
	stages.Go(func() {
		defer close(writerDone)
		p.writeLoop(procCtx)
	})
	commitCtx, stopCommitter := context.WithCancel(procCtx)
	stages.Go(func() { p.commitLoop(commitCtx) })

	runErr := p.pollLoop(ctx, procCtx)
	close(p.windows)
	<-writerDone
	stopCommitter()
	stages.Wait()
	// Whatever the committer had not committed yet goes now, before the
	// group is left.
	_ = p.commitSettled(procCtx) // a failure here is committed on revoke, or replayed
	p.cl.AllowRebalance()

	// Leave now rather than let the session time out, so the partitions
	// move at once; the revoke this causes commits anything still settled
	// but uncommitted.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.DrainTimeout)
	defer cancel()
	if err := p.cl.LeaveGroupContext(lctx); err != nil {
		p.log.Warn("leaving the consumer group", zap.Error(err))
	}
	p.log.Info("persister stopped")
	return runErr
}

// LagExporter is the component exporting the consumer group's lag, to run
// beside the persister (Close closes its client, so it must stop before
// Close); nil when Config.LagInterval is negative.
func (p *Persister) LagExporter() *LagExporter { return p.lag }

// Ready returns nil when the persister runs and can write: no outage in
// progress and Postgres answers a ping. During an outage it returns the
// error being retried ("postgres unavailable: ...").
func (p *Persister) Ready(ctx context.Context) error {
	p.mu.Lock()
	running, pgErr, dltErr := p.running, p.outage[opUpsert].lastErr(), p.outage[opDeadLetter].lastErr()
	p.mu.Unlock()
	switch {
	case !running:
		return errors.New("persister is not running")
	case pgErr != nil:
		if errors.Is(pgErr, pgstore.ErrUnavailable) {
			return pgErr
		}
		return fmt.Errorf("%w: %w", pgstore.ErrUnavailable, pgErr)
	case dltErr != nil:
		return fmt.Errorf("dead-letter topic unavailable: %w", dltErr)
	}
	return p.store.Ping(ctx)
}

// Close closes the Kafka client and, when the persister opened it, the
// store. Call it after Run has returned.
func (p *Persister) Close() {
	p.closeOnce.Do(func() {
		if p.lag != nil {
			p.lag.cl.Close()
		}
		p.cl.CloseAllowingRebalance()
		if p.ownStore {
			p.store.Close()
		}
	})
}
