package persister

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sethvargo/go-retry"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// Persister is one consumer-group member writing the topic to Postgres.
// Build it with New, run it with Run, and Close it after Run returns.
type Persister struct {
	cfg      Config
	log      *zap.Logger
	m        *metrics
	store    *pgstore.Store
	ownStore bool
	cl       *kgo.Client
	lag      *LagExporter // nil when LagInterval < 0

	// blocked receives a signal when a rebalance waits on the batch in hand
	// (OnPartitionsCallbackBlocked): the linger is then cut short.
	blocked chan struct{}

	started   atomic.Bool
	closeOnce sync.Once
	// onLinger, set only by tests, runs when a linger starts.
	onLinger func()

	// shardLogs name the shard in the logs of its retry loop.
	shardLogs []*zap.Logger

	mu      sync.Mutex
	running bool
	// outage holds, per operation (opUpsert, opDeadLetter), the retry
	// loops in progress and the last error of one; while it is non-empty
	// fetching is paused and Ready fails. Loops are counted because the
	// shards of a batch retry concurrently: the outage ends only when the
	// last of them recovers.
	outage map[string]*outage
	// settled holds, per partition, the last record that is in Postgres or
	// acked on the dead-letter topic but whose offset is not yet committed
	// (a commit failed). It is committed with the next batch or on revoke,
	// and dropped when the partition is lost.
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
	}
	// A writer waiting for a connection held by another would serialise
	// the shards, or stall them behind a slow one.
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
		// Offsets are committed by hand, after the Postgres commit, and
		// rebalances wait until the batch in hand is settled, so a commit
		// never lands on a partition this member no longer owns.
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(p.onRevoked),
		kgo.OnPartitionsLost(p.onLost),
		kgo.OnPartitionsCallbackBlocked(p.onBlocked),
		kgo.RecordDeliveryTimeout(cfg.DLTDeliveryTimeout),
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
		p.lag = newLagExporter(kadm.NewClient(cl), cfg.Group, cfg.Topic, cfg.LagInterval, cfg.Registerer, p.log)
	}
	return p, nil
}

// newPersister builds a Persister on a filled, valid cfg, without its
// Kafka client, and with the store of cfg (nil when it is to be opened).
func newPersister(cfg Config) *Persister {
	p := &Persister{
		cfg:     cfg,
		log:     cfg.Logger.Named("persister"),
		m:       newMetrics(cfg.Registerer),
		store:   cfg.Store,
		blocked: make(chan struct{}, 1),
		outage:  map[string]*outage{},
		settled: map[topicPartition]*kgo.Record{},
	}
	for i := range cfg.Writers {
		p.shardLogs = append(p.shardLogs, p.log.With(zap.Int("shard", i)))
	}
	return p
}

// Run consumes until ctx ends, then drains: the batch in hand is finished
// on a context detached from ctx and bounded by DrainTimeout, committed,
// and the group is left. It returns nil after a shutdown by ctx, or the
// error that stopped it (the client was closed). Run may be called once.
func (p *Persister) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("persister: Run called twice")
	}
	p.setRunning(true)
	defer p.setRunning(false)

	// procCtx outlives ctx by DrainTimeout, so a SIGTERM never throws away
	// a batch that is one statement away from being written.
	procCtx, cancelProc := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelProc()
	stopDrainTimer := context.AfterFunc(ctx, func() { time.AfterFunc(p.cfg.DrainTimeout, cancelProc) })
	defer stopDrainTimer()

	p.log.Info("persister running", zap.String("topic", p.cfg.Topic), zap.String("group", p.cfg.Group),
		zap.String("dlt_topic", p.cfg.DLTTopic), zap.Int("max_poll_records", p.cfg.MaxPollRecords),
		zap.Duration("linger", p.cfg.Linger), zap.Int("writers", p.cfg.Writers))
	var runErr error
	for ctx.Err() == nil {
		recs, trigger, err := p.poll(ctx)
		if err != nil {
			runErr = err
			break
		}
		if len(recs) > 0 {
			if err := p.flush(procCtx, recs, trigger); err != nil {
				// Only the end of procCtx stops a flush: nothing of this
				// batch is committed, so its partitions' next owner
				// replays it, and the max-merge makes that harmless.
				p.log.Warn("abandoning the batch in hand uncommitted", zap.Int("num_records", len(recs)), zap.Error(err))
				break
			}
		}
		p.cl.AllowRebalance()
	}
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
// beside the persister (it uses the persister's client, so it must stop
// before Close); nil when Config.LagInterval is negative.
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
		p.cl.CloseAllowingRebalance()
		if p.ownStore {
			p.store.Close()
		}
	})
}

// poll returns the next batch and what cut it: one PollRecords, then, with
// a linger, more polls until the batch is full, the linger ends, a
// rebalance waits on us, or ctx ends. An error means the client is closed.
func (p *Persister) poll(ctx context.Context) ([]*kgo.Record, string, error) {
	limit := p.cfg.MaxPollRecords
	// A signal left over from the previous batch has been served by its
	// AllowRebalance.
	select {
	case <-p.blocked:
	default:
	}
	recs, err := p.take(p.cl.PollRecords(ctx, limit))
	if err != nil || len(recs) == 0 {
		return recs, "", err
	}
	var revoked atomic.Bool
	if p.cfg.Linger > 0 && len(recs) < limit && ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, p.cfg.Linger)
		if p.onLinger != nil {
			p.onLinger()
		}
		go func() {
			select {
			case <-p.blocked:
				revoked.Store(true)
				cancel()
			case <-lctx.Done():
			}
		}()
		for len(recs) < limit && lctx.Err() == nil {
			more, err := p.take(p.cl.PollRecords(lctx, limit-len(recs)))
			recs = append(recs, more...)
			if err != nil {
				cancel()
				return recs, "", err
			}
		}
		cancel()
	}
	switch {
	case len(recs) >= limit:
		return recs, triggerCount, nil
	case revoked.Load():
		return recs, triggerRevoke, nil
	case ctx.Err() != nil:
		return recs, triggerShutdown, nil
	}
	return recs, triggerLinger, nil
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

// flush settles one batch: every record ends in Postgres or acked on the
// dead-letter topic, then the offsets are committed. It returns an error
// only when ctx ends first; then nothing of the batch is committed.
func (p *Persister) flush(ctx context.Context, recs []*kgo.Record, trigger string) error {
	start := time.Now()
	p.m.batches.WithLabelValues(trigger).Inc()
	p.m.batchSize.Observe(float64(len(recs)))
	p.m.consumed.Add(float64(len(recs)))

	states := make([]receipt.State, 0, len(recs))
	sources := make(map[receipt.Key][]*kgo.Record, len(recs))
	var undecodable []deadLetter
	for _, r := range recs {
		s, err := event.Decode(r)
		if err != nil {
			p.log.Warn("dead-lettering an undecodable record", recordFields(r, err)...)
			undecodable = append(undecodable, deadLetter{src: r, reason: err.Error()})
			continue
		}
		// Merging into the zero state applies the rules of the merge to a
		// lone record too (reading implies delivery), so what Postgres
		// ends with does not depend on how records fell into batches.
		s, _ = receipt.Merge(receipt.State{}, s)
		states = append(states, s)
		sources[s.Key] = append(sources[s.Key], r)
	}
	// Dead letters go out before the rows are written so that a poison
	// record never waits on a Postgres outage.
	if err := p.produceDead(ctx, undecodable, kindUndecodable); err != nil {
		return err
	}

	rows := batch.Dedupe(states, stateKey, mergeStates)
	p.m.dedupeIn.Add(float64(len(states)))
	p.m.dedupeOut.Add(float64(len(rows)))
	written, failed, err := p.write(ctx, rows)
	if err != nil {
		return fmt.Errorf("writing batch of %d rows: %w", len(rows), err)
	}
	if len(failed) > 0 {
		var rejected []deadLetter
		for _, f := range failed {
			// The row merged every record of its key, so all of them go:
			// the reconciler merges them again.
			for _, r := range sources[f.key] {
				p.log.Warn("dead-lettering a record Postgres rejects", recordFields(r, f.err)...)
				rejected = append(rejected, deadLetter{src: r, reason: f.err.Error()})
			}
		}
		if err := p.produceDead(ctx, rejected, kindRejected); err != nil {
			return err
		}
	}

	// Every shard is in Postgres (or its rejected rows acked on the
	// dead-letter topic): only now may the offsets move.
	p.commit(ctx, recs)
	p.log.Debug("batch settled", zap.String("trigger", trigger), zap.Int("num_records", len(recs)),
		zap.Int("num_rows", written), zap.Int("num_undecodable", len(undecodable)),
		zap.Int("num_rejected_rows", len(failed)), zap.Duration("duration", time.Since(start)))
	return nil
}

// rejectedRow is a row Postgres refused even alone in its transaction.
type rejectedRow struct {
	key receipt.Key
	err error
}

// write puts the deduped rows of a batch in Postgres. They are split into
// Writers shards by a hash of user_id and the shards are written
// concurrently, each by batch.Bisect in its own transactions on its own
// connection: a rejected row is isolated within its shard, and an outage
// is retried by each shard on its own, so a shard already committed is
// never written again. It returns when every shard is settled, with the
// count of rows written and the rows rejected; an error means ctx ended
// first, and the batch must not be committed.
func (p *Persister) write(ctx context.Context, rows []receipt.State) (int, []rejectedRow, error) {
	if len(rows) == 0 {
		return 0, nil, nil
	}
	start := time.Now()
	defer func() { p.m.writeTime.Observe(time.Since(start).Seconds()) }()
	shards := shardByUser(rows, p.cfg.Writers)
	results := make([]batch.Result[receipt.State], len(shards))
	errs := make([]error, len(shards))
	writeShard := func(i int) {
		res, err := batch.Bisect(shards[i], func(part []receipt.State) error { return p.upsert(ctx, i, part) }, isRejected)
		// Counted as each shard commits: a shard stays written even when
		// another one's is abandoned.
		p.m.rowsWritten.Add(float64(len(res.Written)))
		results[i], errs[i] = res, err
	}
	var nonEmpty []int
	for i, sh := range shards {
		if len(sh) > 0 {
			nonEmpty = append(nonEmpty, i)
		}
	}
	if len(nonEmpty) == 1 {
		// One shard (Writers 1, or a small batch): no goroutine.
		writeShard(nonEmpty[0])
	} else {
		var wg sync.WaitGroup
		for _, i := range nonEmpty {
			wg.Go(func() { writeShard(i) })
		}
		wg.Wait()
	}

	var written int
	var rejected []rejectedRow
	for i, res := range results {
		if errs[i] != nil {
			// Only the end of ctx stops a shard, so every failed shard
			// failed the same way: the first says it.
			return 0, nil, fmt.Errorf("writing shard %d of %d rows: %w", i, len(shards[i]), errs[i])
		}
		written += len(res.Written)
		for _, f := range res.Failed {
			rejected = append(rejected, rejectedRow{key: shards[i][f.Index].Key, err: f.Err})
		}
	}
	return written, rejected, nil
}

// shardByUser splits rows into n shards by shardOf(user_id): all the rows
// of a user, hence each key, land in one shard, so shards share no rows
// and their transactions never wait on each other's row locks (nor
// deadlock). Rows keep their order within a shard; shards may be empty.
func shardByUser(rows []receipt.State, n int) [][]receipt.State {
	if n <= 1 {
		return [][]receipt.State{rows}
	}
	shards := make([][]receipt.State, n)
	for i := range shards {
		shards[i] = make([]receipt.State, 0, len(rows)/n+len(rows)/(4*n)+1)
	}
	for _, r := range rows {
		i := shardOf(r.Key.User, n)
		shards[i] = append(shards[i], r)
	}
	return shards
}

// shardOf is the FNV-1a hash of user, modulo n: stable across processes,
// so a user's shard never depends on which replica or run writes it.
func shardOf(user string, n int) int {
	h := uint32(2166136261)
	for i := 0; i < len(user); i++ {
		h ^= uint32(user[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

func stateKey(s receipt.State) receipt.Key { return s.Key }

// mergeStates keeps the greatest of each cursor (receipt.Merge is
// field-wise, so read and delivered each keep their own max).
func mergeStates(kept, next receipt.State) receipt.State {
	m, _ := receipt.Merge(kept, next)
	return m
}

// upsert writes rows (of one shard) in one transaction, retrying for as
// long as Postgres is unavailable. It returns nil, a rejection (for Bisect
// to split), or the end of ctx.
func (p *Persister) upsert(ctx context.Context, shard int, rows []receipt.State) error {
	return p.retry(ctx, p.shardLogs[shard], opUpsert, isUpsertRetryable, func(ctx context.Context) error {
		start := time.Now()
		_, err := p.store.Upsert(ctx, rows)
		p.m.upsertTime.Observe(time.Since(start).Seconds())
		if pgstore.Classify(err) == errclass.Permanent {
			p.shardLogs[shard].Error("postgres refuses the write for good; the partition waits for an operator", zap.Error(err))
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

// commit commits the batch's offsets (and any settled earlier but left
// uncommitted). A failed commit is not retried here: the offsets stay in
// settled for the next commit or the revoke, and a replay is harmless.
func (p *Persister) commit(ctx context.Context, recs []*kgo.Record) {
	p.mu.Lock()
	for _, r := range recs {
		tp := topicPartition{r.Topic, r.Partition}
		if cur := p.settled[tp]; cur == nil || cur.Offset < r.Offset {
			p.settled[tp] = r
		}
	}
	toCommit := make([]*kgo.Record, 0, len(p.settled))
	for _, r := range p.settled {
		toCommit = append(toCommit, r)
	}
	p.mu.Unlock()

	if err := p.cl.CommitRecords(ctx, toCommit...); err != nil {
		p.m.commitErrors.Inc()
		p.log.Warn("committing offsets; they will be committed with the next batch or on revoke", zap.Error(err))
		return
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
