package persister

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sethvargo/go-retry"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Persister is one consumer-group member writing the topic to Postgres.
// Build it with New, run it with Run, and Close it after Run returns.
type Persister struct {
	// env is what the kinds' statements run against.
	env      *kinds.Env
	cfg      Config
	log      *zap.Logger
	m        *metrics
	store    *pgstore.Store
	ownStore bool
	cl       *kgo.Client
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

type outage struct {
	err   error
	loops int
}

type topicPartition struct {
	topic     string
	partition int32
}

// handoff is a window and what cut it.
type handoff struct {
	w       *window
	trigger string
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
		env:       &kinds.Env{Postgres: cfg.Store, MentionCap: cfg.MentionCap},
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

// pollLoop fills windows and hands them to the writer until ctx ends or
// the client is closed; a window in hand at the end is handed over too
// (the writer finishes it on procCtx).
func (p *Persister) pollLoop(ctx, procCtx context.Context) error {
	for {
		w, trigger, err := p.fill(ctx)
		if w.len() > 0 {
			// Blocks while the writer is busy: the window is full, or it
			// must be settled now (a rebalance or the shutdown waits).
			p.inflight.Add(1)
			if !p.handOver(procCtx, handoff{w: w, trigger: trigger}) {
				p.inflight.Done()
				p.log.Warn("abandoning a window uncommitted: the drain timed out", zap.Int("num_records", w.len()))
				return err
			}
		}
		if err != nil || ctx.Err() != nil {
			return err
		}
		if trigger == triggerRevoke {
			// Every window handed over is written (or the drain ends):
			// the revoke callback commits what the committer has not.
			p.waitSettled(procCtx)
			// A signal that arrives meanwhile costs at most one more
			// (harmless) barrier: never drain it, or a new rebalance
			// could be missed.
			p.cl.AllowRebalance()
		}
	}
}

// handOver gives h to the writer, waiting while it is busy; false means
// procCtx ended first. A busy writer's wait sorts the window; a free
// writer sorts it while the poller polls the next.
func (p *Persister) handOver(procCtx context.Context, h handoff) bool {
	select {
	case p.windows <- h:
		return true
	default:
	}
	h.w.sort()
	select {
	case p.windows <- h:
		return true
	case <-procCtx.Done():
		return false
	}
}

// waitSettled waits until the writer has settled every window handed to
// it, or ctx ends.
func (p *Persister) waitSettled(ctx context.Context) {
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// fill polls into a new window until it must be handed over, and says why:
// it is full (count); the linger since its first records ran out and the
// writer is free (linger); a rebalance waits on us (revoke); or ctx ended
// (shutdown). While the writer is busy, a lingered window keeps growing.
// An error means the client is closed.
func (p *Persister) fill(ctx context.Context) (*window, string, error) {
	w := newWindow(min(p.cfg.BatchRecords, 4096), p.cfg.Kinds, p.env)
	select {
	case <-p.blocked:
		// A rebalance came while the last window was handed over.
		return w, triggerRevoke, nil
	default:
	}
	stop := ctx
	ctx, cancelFill := context.WithCancel(ctx)
	defer cancelFill()
	p.mu.Lock()
	p.cancelPoll = cancelFill
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.cancelPoll = nil
		p.mu.Unlock()
	}()
	var lingerEnd time.Time
	for {
		if stop.Err() != nil {
			return w, triggerShutdown, nil
		}
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if w.len() > 0 {
			// Wait for more records only until the linger ends; past it,
			// briefly, so the hand-off is retried soon.
			wait := max(time.Until(lingerEnd), time.Millisecond)
			pollCtx, cancel = context.WithTimeout(ctx, wait)
		}
		recs, err := p.pollOnce(pollCtx, min(p.cfg.MaxPollRecords, p.cfg.BatchRecords-w.len()))
		cancel()
		if err != nil {
			return w, "", err
		}
		if len(recs) > 0 {
			p.rate.add(len(recs), time.Now())
			if w.len() == 0 {
				linger := p.cfg.lingerAt(p.rate.perSecond())
				lingerEnd = time.Now().Add(linger)
				if p.onLinger != nil && linger > 0 {
					p.onLinger()
				}
			}
			p.m.consumed.Add(float64(len(recs)))
			w.add(recs)
		}
		select {
		case <-p.blocked:
			return w, triggerRevoke, nil
		default:
		}
		switch {
		case w.len() >= p.cfg.BatchRecords:
			return w, triggerCount, nil
		case w.len() > 0 && !time.Now().Before(lingerEnd):
			// Hand over at once if the writer is free; otherwise widen.
			p.inflight.Add(1)
			select {
			case p.windows <- handoff{w: w, trigger: triggerLinger}:
				return newWindow(0, p.cfg.Kinds, p.env), "", nil
			default:
				p.inflight.Done()
			}
		}
	}
}

// pollOnce polls up to limit records, waiting at most until ctx ends.
func (p *Persister) pollOnce(ctx context.Context, limit int) ([]*kgo.Record, error) {
	fs := p.cl.PollRecords(ctx, limit)
	return p.take(fs)
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

// take returns the records of fetches, logging partition errors (kgo
// retries them itself); it fails only when the client is closed.
func (p *Persister) take(fs kgo.Fetches) ([]*kgo.Record, error) {
	var closed error
	fs.EachError(func(topic string, partition int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kgo.ErrClientClosed):
			closed = fmt.Errorf("polling %s: %w", p.cfg.Topic, err)
		default:
			p.log.Warn("fetching", zap.String("topic", topic), zap.Int32("partition", partition), zap.Error(err))
		}
	})
	return fs.Records(), closed
}

// writeLoop settles the windows the poller hands over, one at a time, in
// order. After ctx ends (the drain timed out) it only receives, so the
// poller never blocks on a writer that gave up.
func (p *Persister) writeLoop(ctx context.Context) {
	for h := range p.windows {
		if ctx.Err() == nil {
			if err := p.settle(ctx, h.w, h.trigger); err != nil {
				// Only the end of ctx stops a settle: nothing of this
				// window is committed, so its partitions' next owner
				// replays it, and the max-merge makes that harmless.
				p.log.Warn("abandoning the window in hand uncommitted", zap.Int("num_records", h.w.len()), zap.Error(err))
			}
		}
		p.inflight.Done()
	}
}

// settle writes one window: every record ends in Postgres or acked on the
// dead-letter topic, then its offsets are handed to the committer. It
// returns an error only when ctx ends first; then nothing of the window is
// committed.
func (p *Persister) settle(ctx context.Context, w *window, trigger string) error {
	start := time.Now()
	p.m.batches.WithLabelValues(trigger).Inc()
	p.m.batchSize.Observe(float64(w.len()))

	// Dead letters go out before the rows are written so that a poison
	// record never waits on a Postgres outage.
	for _, dl := range w.undecodable {
		p.log.Warn("dead-lettering an undecodable record", recordFields(dl.src, errors.New(dl.reason))...)
	}
	if err := p.produceDead(ctx, w.undecodable, kindUndecodable); err != nil {
		return err
	}

	tombs, clock, err := p.applyErasures(ctx, w)
	if err != nil {
		return err
	}

	decoded := w.len() - len(w.undecodable)
	total := w.rowCount()
	p.m.dedupeIn.Add(float64(decoded))
	p.m.dedupeOut.Add(float64(total))
	var feed *changeSink
	if p.cfg.ChangesTopic != "" {
		feed = &changeSink{}
	}
	written, skipped, failed, err := p.writeRows(ctx, w, feed)
	if err != nil {
		return fmt.Errorf("writing window of %d rows: %w", total, err)
	}
	p.m.staleSkipped.Add(float64(skipped))
	if decoded > 0 {
		p.m.dedupeRatio.Set(1 - float64(total-skipped)/float64(decoded))
	}
	// An erasure applied by another process (the dlt-reconciler, another
	// replica) after the tombstone lookup may have missed rows written
	// since: take them back and write again what survives it.
	for {
		raced, err := p.takeBackRaced(ctx, w, &clock, tombs)
		if err != nil {
			return err
		}
		if len(raced) == 0 {
			break
		}
		n, _, f, err := p.writeRows(ctx, w.ofUsers(raced), feed)
		if err != nil {
			return fmt.Errorf("writing again the rows of %d users erased meanwhile: %w", len(raced), err)
		}
		written += n
		if len(f) > 0 && failed == nil {
			failed = map[rejection]error{}
		}
		maps.Copy(failed, f)
	}
	if len(failed) > 0 {
		// A rejected row merged every record of its key into that table,
		// so all of them go: the reconciler merges them again.
		rejected := w.sourcesOf(failed)
		for _, dl := range rejected {
			p.log.Warn("dead-lettering a record Postgres rejects", recordFields(dl.src, errors.New(dl.reason))...)
		}
		if err := p.produceDead(ctx, rejected, kindRejected); err != nil {
			return err
		}
	}

	// The change feed goes after the database commit and before the
	// offsets: a crash between replays the window, which emits again.
	if err := p.produceChanges(ctx, feed); err != nil {
		return err
	}

	// Every row is in Postgres (or its records acked on the dead-letter
	// topic): only now may the offsets move.
	p.settleOffsets(w.offsets())
	p.log.Debug("window settled", zap.String("trigger", trigger), zap.Int("num_records", w.len()),
		zap.Int("num_rows", total), zap.Int("num_written", written), zap.Int("num_undecodable", len(w.undecodable)),
		zap.Int("num_rejected_rows", len(failed)), zap.Duration("duration", time.Since(start)))
	return nil
}

// writeRows writes a window's parts, every kind's statements Writers at
// a time, then the retention of the kinds that have one. The cursors take
// their own path (cursorJobs: the written cache, bulk COPY, the change
// feed and the cursor-move log). It returns the rows written, the cursor
// rows skipped as not ahead of what this replica wrote, and the rejected
// rows; an error means ctx ended.
func (p *Persister) writeRows(ctx context.Context, w *window, feed *changeSink) (written, skipped int, failed map[rejection]error, err error) {
	var jobs, trims []job
	for i, k := range w.kinds {
		if k == kinds.Cursors {
			rows := w.cursorRows()
			fresh := p.written.filter(rows)
			skipped = len(rows) - len(fresh)
			jobs = append(jobs, cursorJobs(p, i, fresh, feed)...)
			jobs = append(jobs, p.moveJobs(fresh)...)
			continue
		}
		jobs = append(jobs, partJobs(p, i, w.parts[i])...)
		trims = append(trims, trimJobs(p, w.parts[i])...)
	}
	written, failed, err = p.runJobs(ctx, jobs)
	if err != nil {
		return 0, 0, nil, err
	}
	if _, _, err := p.runJobs(ctx, trims); err != nil {
		return 0, 0, nil, fmt.Errorf("applying the retention of a window's kinds: %w", err)
	}
	return written, skipped, failed, nil
}

// tombstoneChunk bounds the users of one tombstone lookup.
const tombstoneChunk = 10_000

// applyErasures applies the window's erasures (each deletes the user's
// rows and raises the tombstone in one transaction), then looks up the
// tombstones of the window's users (one query per tombstoneChunk users)
// and drops the events that predate them, so a replay, a spool replayed
// late or an event produced before the erasure never writes an erased
// user back. The erasures go first: a window holding an erasure and the
// user's later marks writes those marks after it. It retries while
// Postgres fails (an erasure is never dead-lettered: it was validated on
// decode); an error means ctx ended. It returns the tombstones found and
// the erasure clock read before the lookup, for takeBackRaced.
func (p *Persister) applyErasures(ctx context.Context, w *window) (tombs tombstone.Set, clock int64, err error) {
	users := make([]string, 0, len(w.erasures))
	for u := range w.erasures {
		users = append(users, u)
	}
	slices.Sort(users)
	for _, u := range users {
		t := w.erasures[u]
		var deleted int64
		var advanced bool
		err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
			var err error
			deleted, advanced, err = p.store.Erase(ctx, t)
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("applying the erasure of %s: %w", u, err)
		}
		p.log.Info("erasure applied", zap.String("user_id", u), zap.Int64("generation", t.Generation),
			zap.Bool("advanced", advanced), zap.Int64("rows_deleted", deleted))
	}

	// Read before the lookup: an erasure committed after it moves the
	// clock, which takeBackRaced checks once the rows are written.
	err = p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
		var err error
		clock, err = p.store.ErasureClock(ctx)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reading the erasure clock: %w", err)
	}
	users = w.users()
	tombs, err = p.tombstones(ctx, users)
	if err != nil {
		return nil, 0, err
	}
	if p.onTombstones != nil {
		p.onTombstones(users)
	}
	p.dropErased(w, tombs)
	return tombs, clock, nil
}

// always retries every error: the store's calls of a window are retried
// while Postgres fails, until ctx ends.
func always(error) bool { return true }

// tombstones looks up the tombstones of users, one query per
// tombstoneChunk users.
func (p *Persister) tombstones(ctx context.Context, users []string) (tombstone.Set, error) {
	tombs := tombstone.Set{}
	for _, part := range chunk(users, tombstoneChunk) {
		err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
			got, err := p.store.Tombstones(ctx, part)
			for _, t := range got {
				tombs.Add(t)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("looking up the tombstones of a window: %w", err)
		}
	}
	return tombs, nil
}

// dropErased drops the window's events that predate their user's erasure
// and makes the written cache forget the erased users' keys.
func (p *Persister) dropErased(w *window, tombs tombstone.Set) {
	if len(tombs) == 0 {
		return
	}
	// What this replica wrote for an erased user's keys before the erasure
	// says nothing of Postgres now.
	var stale []receipt.Key
	for _, r := range w.cursorRows() {
		if _, ok := tombs[r.Key.User]; ok {
			stale = append(stale, r.Key)
		}
	}
	p.written.forget(stale)
	if dropped := w.dropErased(tombs); dropped > 0 {
		p.m.erasedDropped.Add(float64(dropped))
		p.log.Info("dropped events that predate their user's erasure", zap.Int("num_events", dropped), zap.Int("num_erased_users", len(tombs)))
	}
}

// takeBackRaced runs once a window's rows are committed. Unless the
// erasure clock moved since the tombstone lookup (clock), nothing was
// erased meanwhile, and an erasure still to come deletes what was
// written. Otherwise it looks the tombstones up again: for each user
// erased since (an erasure the dlt-reconciler or another replica applied
// first, whose deletes ran before this window's rows were written), it
// deletes the user's rows again (pgstore.EraseAgain) and drops the
// window's events that predate the erasure; it returns those users, whose
// surviving rows the caller writes again, and advances clock and tombs.
// An error means ctx ended.
func (p *Persister) takeBackRaced(ctx context.Context, w *window, clock *int64, tombs tombstone.Set) (tombstone.Set, error) {
	var now int64
	err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
		var err error
		now, err = p.store.ErasureClockSettled(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the erasure clock: %w", err)
	}
	if now == *clock {
		return nil, nil
	}
	*clock = now
	latest, err := p.tombstones(ctx, w.users())
	if err != nil {
		return nil, err
	}
	raced := tombstone.Set{}
	for u, t := range latest {
		if t.Generation > tombs[u].Generation {
			raced.Add(t)
			tombs.Add(t)
		}
	}
	users := slices.Sorted(maps.Keys(raced))
	for _, u := range users {
		var deleted int64
		err := p.retry(ctx, p.log, opUpsert, always, func(ctx context.Context) error {
			var err error
			deleted, err = p.store.EraseAgain(ctx, u)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("erasing %s again: %w", u, err)
		}
		p.m.erasuresRaced.Inc()
		p.log.Warn("an erasure was applied while the window was written: its user's rows are deleted again and what follows the erasure is written again",
			zap.String("user_id", u), zap.Int64("generation", raced[u].Generation), zap.Int64("rows_deleted", deleted))
	}
	p.dropErased(w, raced)
	return raced, nil
}

// job is one statement of a window: it writes its rows (bisecting a
// rejected one out), retrying while Postgres is unavailable, and returns
// how many rows it wrote and the rejected ones; an error means ctx ended.
type job func(ctx context.Context, slot int) (int, map[rejection]error, error)

// cursorJobs are the statements of a window's cursor rows: StatementRows
// each, with UpsertBulk (COPY) from stagedMinRows; each remembers what it
// wrote in the written cache.
func cursorJobs(p *Persister, kind int, rows []receipt.State, feed *changeSink) []job {
	var out []job
	for _, part := range chunk(rows, p.cfg.StatementRows) {
		out = append(out, func(ctx context.Context, slot int) (int, map[rejection]error, error) {
			upsert := p.store.Upsert
			if len(part) >= stagedMinRows {
				upsert = p.upsertBulk
			}
			if feed != nil {
				upsert = feed.upsert(p.store)
			}
			res, err := batch.Bisect(part, func(sub []receipt.State) error {
				return p.statement(ctx, slot, len(sub), func(ctx context.Context) error { _, err := upsert(ctx, sub); return err })
			}, isRejected)
			// Counted as each statement commits: a statement stays written
			// even when another one's is abandoned.
			p.m.rowsWritten.Add(float64(len(res.Written)))
			p.written.remember(res.Written)
			return len(res.Written), rejections(kind, part, res.Failed, func(s receipt.State) string { return s.Key.KafkaKey() }), err
		})
	}
	return out
}

// partJobs are the statements of one kind's part of a window.
func partJobs(p *Persister, kind int, part kinds.Part) []job {
	var out []job
	for _, st := range part.Statements(p.cfg.StatementRows) {
		out = append(out, func(ctx context.Context, slot int) (int, map[rejection]error, error) {
			idx := make([]int, st.Len())
			for i := range idx {
				idx[i] = i
			}
			// Bisect splits contiguous ranges: sub is idx[lo:hi].
			res, err := batch.Bisect(idx, func(sub []int) error {
				return p.statement(ctx, slot, len(sub), func(ctx context.Context) error {
					_, err := st.Write(ctx, sub[0], sub[len(sub)-1]+1)
					return err
				})
			}, isRejected)
			p.m.rowsWritten.Add(float64(len(res.Written)))
			return len(res.Written), rejections(kind, idx, res.Failed, st.RecordKey), err
		})
	}
	return out
}

// trimJobs apply a kind's retention to the keys of its part (none for
// most kinds). The retention only bounds the table (readers apply it
// themselves), so a rejection, which the statement cannot meet, is
// logged and left to the next window of the key.
func trimJobs(p *Persister, part kinds.Part) []job {
	var out []job
	for _, trim := range part.Trims(p.cfg.StatementRows) {
		out = append(out, func(ctx context.Context, slot int) (int, map[rejection]error, error) {
			var n int64
			// A trim writes no rows: it pays nothing to the write cap.
			err := p.statement(ctx, slot, 0, func(ctx context.Context) error {
				var err error
				n, err = trim(ctx)
				return err
			})
			if err != nil && ctx.Err() == nil {
				p.log.Warn("applying a kind's retention", zap.Error(err))
				err = nil
			}
			p.m.mentionsTrimmed.Add(float64(n))
			return 0, nil, err
		})
	}
	return out
}

func rejections[T any](kind int, part []T, failed []batch.Failure, key func(T) string) map[rejection]error {
	if len(failed) == 0 {
		return nil
	}
	out := make(map[rejection]error, len(failed))
	for _, f := range failed {
		out[rejection{kind, key(part[f.Index])}] = f.Err
	}
	return out
}

// write puts the sorted, deduplicated cursor rows of a window in
// Postgres (see runJobs) and returns the count written and the rejected
// keys: the cursor table alone, as settle writes it beside the others.
func (p *Persister) write(ctx context.Context, rows []receipt.State) (int, map[receipt.Key]error, error) {
	written, failed, err := p.runJobs(ctx, cursorJobs(p, slices.Index(p.cfg.Kinds, kinds.Cursors), rows, nil))
	if err != nil {
		return 0, nil, err
	}
	var out map[receipt.Key]error
	for r, e := range failed {
		if out == nil {
			out = map[receipt.Key]error{}
		}
		k, _ := receipt.ParseKafkaKey(r.key)
		out[k] = e
	}
	return written, out, nil
}

// runJobs runs a window's statements (one implicit transaction each),
// Writers at a time. Statements hold disjoint key ranges of their table,
// so they never wait on each other's row locks (nor deadlock). A rejected
// row is isolated within its statement by batch.Bisect; an outage is
// retried by each statement on its own, so one already committed is never
// written again. It returns when every statement is settled, with the
// count of rows written and the rejected rows; an error means ctx ended
// first, and the window must not be committed.
func (p *Persister) runJobs(ctx context.Context, jobs []job) (int, map[rejection]error, error) {
	if len(jobs) == 0 {
		return 0, nil, nil
	}
	start := time.Now()
	defer func() { p.m.writeTime.Observe(time.Since(start).Seconds()) }()
	written := make([]int, len(jobs))
	failed := make([]map[rejection]error, len(jobs))
	errs := make([]error, len(jobs))
	var next atomic.Int64
	work := func(slot int) {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(jobs) || ctx.Err() != nil {
				return
			}
			written[i], failed[i], errs[i] = jobs[i](ctx, slot)
		}
	}
	if workers := min(p.cfg.Writers, len(jobs)); workers == 1 {
		work(0)
	} else {
		var wg sync.WaitGroup
		for slot := range workers {
			wg.Go(func() { work(slot) })
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	var total int
	var rejected map[rejection]error
	for i := range jobs {
		if errs[i] != nil {
			// Only the end of ctx stops a statement.
			return 0, nil, fmt.Errorf("writing statement %d: %w", i, errs[i])
		}
		total += written[i]
		for r, e := range failed[i] {
			if rejected == nil {
				rejected = map[rejection]error{}
			}
			rejected[r] = e
		}
	}
	return total, rejected, nil
}

// chunk splits rows into consecutive slices of at most n.
func chunk[T any](rows []T, n int) [][]T {
	out := make([][]T, 0, (len(rows)+n-1)/n)
	for start := 0; start < len(rows); start += n {
		out = append(out, rows[start:min(start+n, len(rows)):min(start+n, len(rows))])
	}
	return out
}

// askRowsFor is how long bulk statements ask Postgres which keys have a row
// after the written cache's guess missed (a restart onto a full table, keys
// written by another replica, or evicted from the cache).
const askRowsFor = 30 * time.Second

// upsertBulk writes a bulk statement's rows: the keys this replica wrote
// have a row, and, unless a guess missed lately, every other key is taken
// to have none and COPYed without asking Postgres (a miss costs a COPY cut
// short and the batch's merge by Upsert's statement).
func (p *Persister) upsertBulk(ctx context.Context, rows []receipt.State) (int64, error) {
	if !p.written.enabled() || time.Now().UnixNano() < p.askRowsUntil.Load() {
		return p.store.UpsertBulk(ctx, rows)
	}
	n, missed, err := p.store.UpsertBulkGuessed(ctx, rows, p.written.has)
	if missed {
		p.m.bulkGuessMissed.Inc()
		p.askRowsUntil.Store(time.Now().Add(askRowsFor).UnixNano())
	}
	return n, err
}

// stagedMinRows is the statement size from which UpsertBulk (COPY of the
// new rows in key order) beats the parameter arrays (BENCHMARKS.md).
var stagedMinRows = 1000

// statement runs one statement writing rows rows, retrying for as long
// as Postgres is unavailable. It returns nil, a rejection (for Bisect to
// split), or the end of ctx. With MaxWriteRate it first waits for the
// rows' share of the cap (retries of the statement do not pay again).
func (p *Persister) statement(ctx context.Context, slot, rows int, f func(context.Context) error) error {
	if err := p.wcap.wait(ctx, rows); err != nil {
		return fmt.Errorf("waiting for --max-write-rate: %w", err)
	}
	return p.retry(ctx, p.stmtLogs[slot], opUpsert, isUpsertRetryable, func(ctx context.Context) error {
		start := time.Now()
		err := f(ctx)
		p.m.upsertTime.Observe(time.Since(start).Seconds())
		if pgstore.Classify(err) == errclass.Permanent {
			p.stmtLogs[slot].Error("postgres refuses the write for good; the partition waits for an operator", zap.Error(err))
		}
		return err
	})
}

// deadLetter is a record to send to the dead-letter topic and why.
type deadLetter struct {
	src    *kgo.Record
	reason string
}

// produceDead sends the dead letters and waits for every ack, retrying the
// failed ones for as long as the topic is unavailable.
func (p *Persister) produceDead(ctx context.Context, dls []deadLetter, kind string) error {
	if len(dls) == 0 {
		return nil
	}
	pending := dls
	err := p.retry(ctx, p.log, opDeadLetter, isProduceRetryable, func(ctx context.Context) error {
		// Fresh records each attempt: kgo owns a record until its promise
		// runs, and only the failed ones are sent again.
		recs := make([]*kgo.Record, len(pending))
		index := make(map[*kgo.Record]int, len(pending))
		for i, dl := range pending {
			recs[i] = event.DeadLetter(dl.src, p.cfg.DLTTopic, dl.reason)
			index[recs[i]] = i
		}
		// Results come in completion order, not input order.
		results := p.cl.ProduceSync(ctx, recs...)
		var failed []deadLetter
		for _, r := range results {
			if r.Err != nil {
				failed = append(failed, pending[index[r.Record]])
			}
		}
		p.m.deadLetters.WithLabelValues(kind).Add(float64(len(pending) - len(failed)))
		pending = failed
		err := results.FirstErr()
		if class := kafkaconf.Classify(err); class == errclass.Rejected || class == errclass.Permanent {
			p.log.Error("kafka refuses dead letters for good; the partition waits for an operator",
				zap.String("dlt_topic", p.cfg.DLTTopic), zap.Int("num_records", len(pending)), zap.Error(err))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("producing %d dead letters to %s: %w", len(pending), p.cfg.DLTTopic, err)
	}
	return nil
}

// isRejected tells Bisect which rows to isolate: those Postgres refuses.
func isRejected(err error) bool { return pgstore.Classify(err) == errclass.Rejected }

// isUpsertRetryable keeps retrying a write while Postgres is unavailable,
// and also when it refuses the operation for good (a missing table, bad
// credentials): dead-lettering good rows could only lose them, so the
// partition waits, with /readyz false and the error logged, until an
// operator acts.
func isUpsertRetryable(err error) bool {
	class := pgstore.Classify(err)
	return class == errclass.Unavailable || class == errclass.Permanent
}

// isProduceRetryable keeps retrying a dead letter whatever Kafka answers,
// even an error kafkaconf.Classify calls rejected or permanent: the record
// has nowhere else to go, and its offset must not be committed until it is
// in Postgres or on the dead-letter topic. The partition stalls with
// /readyz false and the error logged (loudly when permanent) until an
// operator acts; only our own shutdown stops it.
func isProduceRetryable(err error) bool { return kafkaconf.Classify(err) != errclass.Canceled }

// retry runs f until it succeeds or fails with an error transient rejects,
// logging to log. While f fails with a transient error, the op is in
// outage: fetching is paused and Ready reports the error. It never gives
// up on its own (see Config.Retry); only the end of ctx stops it.
func (p *Persister) retry(ctx context.Context, log *zap.Logger, op string, transient func(error) bool, f func(context.Context) error) error {
	var attempts int
	var since time.Time
	err := retry.Do(ctx, p.cfg.Retry.New(), func(ctx context.Context) error {
		err := f(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		attempts++
		p.m.retries.WithLabelValues(op).Inc()
		if attempts == 1 {
			since = time.Now()
			log.Warn("retrying until it recovers; fetching is paused", zap.String("op", op), zap.Error(err))
		} else {
			log.Debug("still failing", zap.String("op", op), zap.Int("attempts", attempts), zap.Error(err))
		}
		p.enterOutage(op, err, attempts == 1)
		return retry.RetryableError(err)
	})
	// A loop stopped by the end of ctx leaves the outage in place: the
	// persister is stopping, and Ready keeps failing until Run returns.
	if attempts > 0 && ctx.Err() == nil {
		p.leaveOutage(op)
		log.Info("recovered", zap.String("op", op), zap.Int("attempts", attempts), zap.Duration("outage", time.Since(since)))
	}
	return err
}

// enterOutage records err for op; first is true on the first failure of
// a retry loop, which then counts until its leaveOutage.
func (p *Persister) enterOutage(op string, err error, first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.outage) == 0 {
		// The batch in hand is all this member works on until it is
		// settled; pausing stops buffering more behind it.
		p.cl.PauseFetchTopics(p.cfg.Topic)
	}
	o := p.outage[op]
	if o == nil {
		o = &outage{}
		p.outage[op] = o
	}
	o.err = err
	if first {
		o.loops++
	}
	p.m.ready.Set(0)
}

// leaveOutage ends one retry loop of op; the op's outage ends with its
// last loop.
func (p *Persister) leaveOutage(op string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.outage[op]
	if o == nil {
		return
	}
	if o.loops--; o.loops > 0 {
		return
	}
	delete(p.outage, op)
	if len(p.outage) == 0 {
		p.cl.ResumeFetchTopics(p.cfg.Topic)
		if p.running {
			p.m.ready.Set(1)
		}
	}
}

func (p *Persister) setRunning(running bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = running
	if running && len(p.outage) == 0 {
		p.m.ready.Set(1)
	} else {
		p.m.ready.Set(0)
	}
}

// settleOffsets records a written window's offsets for the committer.
func (p *Persister) settleOffsets(recs []*kgo.Record) {
	p.mu.Lock()
	for _, r := range recs {
		tp := topicPartition{r.Topic, r.Partition}
		if cur := p.settled[tp]; cur == nil || cur.Offset < r.Offset {
			p.settled[tp] = r
		}
	}
	p.mu.Unlock()
	select {
	case p.commitReq <- struct{}{}:
	default:
	}
}

// commitLoop commits settled offsets as they come, off the write path, so
// the next window's statements start at once. A failed commit is retried
// after commitRetry even when no new window comes (a quiet topic would
// otherwise keep showing lag).
func (p *Persister) commitLoop(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.commitReq:
		case <-retry:
		}
		retry = nil
		if !p.commitSettled(ctx) && ctx.Err() == nil {
			retry = time.After(commitRetry)
		}
	}
}

// commitRetry spaces the retries of a failed offset commit.
const commitRetry = time.Second

// commitSettled commits every settled offset and says whether it did (or
// had nothing to do). A failed commit leaves the offsets settled for the
// next commit or the revoke; a replay is harmless.
func (p *Persister) commitSettled(ctx context.Context) bool {
	p.mu.Lock()
	toCommit := make([]*kgo.Record, 0, len(p.settled))
	for _, r := range p.settled {
		toCommit = append(toCommit, r)
	}
	p.mu.Unlock()
	if len(toCommit) == 0 {
		return true
	}
	if err := p.cl.CommitRecords(ctx, toCommit...); err != nil {
		p.m.commitErrors.Inc()
		p.log.Warn("committing offsets; retrying, and they go with the next window or on revoke", zap.Error(err))
		return false
	}
	p.m.commits.Inc()
	p.mu.Lock()
	for _, r := range toCommit {
		tp := topicPartition{r.Topic, r.Partition}
		if p.settled[tp] == r {
			delete(p.settled, tp)
		}
	}
	p.mu.Unlock()
	return true
}

// onRevoked commits what is settled on the revoked partitions before they
// move. With BlockRebalanceOnPoll it runs only between batches, so no
// batch is ever half done here.
func (p *Persister) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	recs := p.takeSettled(revoked)
	if len(recs) == 0 {
		return
	}
	if err := cl.CommitRecords(ctx, recs...); err != nil {
		p.m.commitErrors.Inc()
		p.log.Warn("committing offsets on revoke; the next owner replays from the last commit", zap.Error(err))
		return
	}
	p.m.commits.Inc()
}

// onLost drops what is settled on lost partitions: the group has moved on,
// a commit would fail or rewind another member's.
func (p *Persister) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if recs := p.takeSettled(lost); len(recs) > 0 {
		p.log.Warn("partitions lost with offsets uncommitted; the next owner replays them", zap.Int("num_partitions", len(recs)))
	}
}

func (p *Persister) takeSettled(parts map[string][]int32) []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*kgo.Record
	for topic, ps := range parts {
		for _, part := range ps {
			tp := topicPartition{topic, part}
			if r := p.settled[tp]; r != nil {
				out = append(out, r)
				delete(p.settled, tp)
			}
		}
	}
	return out
}

func (p *Persister) onBlocked(context.Context, *kgo.Client) {
	select {
	case p.blocked <- struct{}{}:
	default:
	}
	p.mu.Lock()
	if p.cancelPoll != nil {
		p.cancelPoll()
	}
	p.mu.Unlock()
}

// lastErr is the outage's last error, or nil when there is none.
func (o *outage) lastErr() error {
	if o == nil {
		return nil
	}
	return o.err
}

func recordFields(r *kgo.Record, err error) []zap.Field {
	return []zap.Field{
		zap.String("topic", r.Topic), zap.Int32("partition", r.Partition),
		zap.Int64("offset", r.Offset), zap.Error(err),
	}
}

// rateMeter estimates records/s over whole seconds: the count of the last
// complete second (a gap of more than one second reads as 0).
type rateMeter struct {
	start time.Time
	count int
	last  float64
}

func (r *rateMeter) add(n int, now time.Time) {
	switch el := now.Sub(r.start); {
	case r.start.IsZero() || el > 2*time.Second:
		r.start, r.count, r.last = now, 0, 0
	case el >= time.Second:
		r.last = float64(r.count) / el.Seconds()
		r.start, r.count = now, 0
	}
	r.count += n
}

func (r *rateMeter) perSecond() float64 { return r.last }
