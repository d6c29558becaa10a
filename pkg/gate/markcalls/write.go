package markcalls

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tracing"
)

// writeJob is one call's states on their way through a shared flush
// (coalesce.go): the flush sets the results, then closes done.
type writeJob struct {
	ctx    context.Context
	marks  []Mark
	states []receipt.State

	merged   []cursors.MergeResult
	produced int // records of this call in the flush's durable write
	// restored: the call left a flush once to have its users restored.
	restored bool
	dur      producer.Durability
	err      error
	done     chan struct{}
}

func newWriteCoalescer(g *Marks) *coalescer[*writeJob] {
	return &coalescer[*writeJob]{
		flush:      g.flushWrites,
		size:       func(j *writeJob) int { return len(j.states) },
		skip:       func(j *writeJob) bool { return j.ctx.Err() != nil },
		maxMarks:   g.Cfg.Coalesce.MaxMarks,
		maxQueued:  g.Cfg.Coalesce.MaxQueued,
		maxFlushes: g.Cfg.Coalesce.Flushes,
		tails:      make(chan struct{}, g.Cfg.Coalesce.Produces),
		m:          newCoalesceMetrics(g.Cfg.Registerer),
	}
}

// Write runs the write path for validated marks: the checks against the
// channels (seq within the head, membership), Redis merge (epochs
// resolved, stale marks refused), then the durable write of every mark
// not refused, then one result per mark. Concurrent calls share the
// checks' lookup, the Redis pipeline and the durable write
// (flushWrites); each call is checked, and acknowledged only when its
// marks are durable, exactly as alone.
func (g *Marks) Write(ctx context.Context, marks []Mark) ([]*receiptsv1.ReceiptResult, error) {
	now := g.NowMs()
	states := make([]receipt.State, len(marks))
	for i, m := range marks {
		states[i] = m.state(now)
	}

	// A call bound for a full spool is refused before Redis sees it (the
	// records' sizes do not change when their epochs are resolved). The
	// records are built for the check only while calls are spooled: the
	// flush encodes each mark once, after the merge resolved its epoch.
	if g.Durable.Spooling() {
		recs := make([]*kgo.Record, len(states))
		for i, st := range states {
			rec, err := event.Encode(st)
			if err != nil {
				return nil, seam.Internal(err)
			}
			rec.Topic = g.Durable.Topic()
			recs[i] = rec
		}
		if err := g.Durable.Refuse(recs); err != nil {
			return nil, g.Unavailable(ctx, len(recs), err)
		}
	}

	j := &writeJob{ctx: ctx, marks: marks, states: states, done: make(chan struct{})}
	if err := g.writes.submit(j); err != nil {
		return nil, g.Unavailable(ctx, len(states), err)
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		// The caller left: nothing is acknowledged (the marks may still
		// be written by the shared flush, which every store max-merges).
		g.M.Events.WithLabelValues(seam.OutcomeUnavailable).Add(float64(len(states)))
		return nil, seam.ContextError(ctx, ctx.Err())
	}
	if j.merged == nil {
		// Refused by the channel checks (checkJobs): nothing was written.
		return nil, j.err
	}
	g.M.CountStale(states, j.merged)
	for i, r := range j.merged {
		if r.Err == nil && r.EpochAhead {
			// The key moved since the checks read it: refused by the merge.
			return nil, EpochAhead(marks[i], r.State.Canonical().ReadEpoch())
		}
	}
	durability := receiptsv1.Durability_DURABILITY_UNSPECIFIED
	if j.produced > 0 {
		if j.err != nil {
			if cerr := seam.ContextError(ctx, j.err); cerr != nil {
				g.M.Events.WithLabelValues(seam.OutcomeUnavailable).Add(float64(j.produced))
				return nil, cerr
			}
			return nil, g.Unavailable(ctx, j.produced, j.err)
		}
		outcome := seam.OutcomeKafka
		durability = receiptsv1.Durability_KAFKA
		if j.dur == producer.Spooled {
			outcome, durability = seam.OutcomeSpooled, receiptsv1.Durability_SPOOLED
		}
		g.M.Events.WithLabelValues(outcome).Add(float64(j.produced))
	} else if j.err != nil {
		// Resolving or encoding failed before anything was produced.
		if cerr := seam.ContextError(ctx, j.err); cerr != nil {
			return nil, cerr
		}
		if _, ok := errors.AsType[*connect.Error](j.err); ok {
			return nil, j.err
		}
		return nil, g.Unavailable(ctx, len(states), j.err)
	}

	merged := j.merged
	if j.produced > 0 {
		g.Restore.NoteDegraded(DegradedUsers(states, merged))
	}
	results := make([]*receiptsv1.ReceiptResult, len(marks))
	for i := range marks {
		res := &receiptsv1.ReceiptResult{Durability: durability}
		switch {
		case merged[i].Err != nil:
			// The merged state is unknown; advanced stays false.
			res.RealtimeDegraded = true
		case merged[i].Stale:
			res.State = event.StateToProto(merged[i].State)
			res.Durability = receiptsv1.Durability_DURABILITY_UNSPECIFIED
			res.Reason = string(apierr.StaleEpoch)
		default:
			res.State = event.StateToProto(merged[i].State)
			res.Advanced = merged[i].Advanced
		}
		results[i] = res
	}
	return results, nil
}

// checkEpochs refuses, before anything is written, a call with a mark
// whose explicit epoch is ahead of the stored read epoch vals read
// (receipt.EpochAhead); the merge checks it again against the value it
// writes over (a key vals did not read, or one that moved meanwhile).
func checkEpochs(vals *cursors.MarkValues, marks []Mark, states []receipt.State) error {
	for i, m := range marks {
		if m.Epoch == receipt.EpochCurrent {
			continue
		}
		if stored, ok := vals.Stored(m.Key); ok && receipt.EpochAhead(stored, states[i]) {
			return EpochAhead(m, stored.Canonical().ReadEpoch())
		}
	}
	return nil
}

// flushWrites writes the marks of several calls together: one lookup of
// the channel facts for the checks (a call failing them is answered alone
// and left out), one Redis pipeline, then one durable write of every
// record (all or nothing, so every call of the batch gets the same
// durability or the same error) while the view moves are published.
// Every mark is produced, including those Redis found to be no-ops: Redis
// may hold a value whose own produce failed (the caller got Unavailable
// and is retrying now), and only this produce makes it durable. A stale
// Mark (an older epoch) changes nothing anywhere: in its place goes what
// Redis holds of its key, since the retry of a mark whose produce failed
// turns stale when a mark-unread moved the epoch meanwhile, and the mark
// Redis took would otherwise never reach Postgres.
func (g *Marks) flushWrites(jobs []*writeJob, handOff func()) {
	jobs, vals := g.checkJobs(jobs)
	if len(jobs) == 0 {
		return
	}
	states := jobs[0].states
	ctxs := []context.Context{jobs[0].ctx}
	if len(jobs) > 1 {
		n := 0
		for _, j := range jobs {
			n += len(j.states)
		}
		states = make([]receipt.State, 0, n)
		ctxs = make([]context.Context, len(jobs))
		for i, j := range jobs {
			states = append(states, j.states...)
			ctxs[i] = j.ctx
		}
	}
	ctx, cancel := batchContext(ctxs)
	defer cancel()
	answer := func(dur producer.Durability, err error) {
		for _, j := range jobs {
			j.dur, j.err = dur, err
			close(j.done)
		}
	}

	// Until the replicas confirm the merges, reads and later writes of
	// these users wait for them (seam/unconfirmed.go); the merges do not
	// wait for earlier ones, which are checked before the answer.
	ctx, confirmed := g.Unconfirmed(ctx, usersOf(states))
	defer confirmed(nil)
	earlier := g.Restore.Earlier(ctx, usersOf(states))
	merged := g.mergeMarksRedis(ctx, vals, states)
	// The view (read-by, ticks, watch streams) is realtime state, not
	// durability: it is published while the records are produced, and
	// the calls are answered once both are done (an acknowledged read is
	// in read-by).
	viewed := make(chan struct{})
	go func() {
		defer close(viewed)
		g.readBy.PublishView(ctx, merged)
	}()
	finish := func(dur producer.Durability, err error) {
		<-viewed
		answer(dur, err)
	}
	off := 0
	for _, j := range jobs {
		n := len(j.states)
		j.merged = merged[off : off+n : off+n]
		off += n
	}
	resolved, err := g.ResolveEpochs(ctx, states, merged)
	if err != nil {
		finish(producer.Unacknowledged, err)
		return
	}
	g.MergeUnloaded(ctx, merged, resolved)
	// Each mark's record is encoded once, here, with its epochs resolved
	// and stamped with the generation read with its merge: consumers drop
	// the event only if the user was erased after it (tombstone.Drops).
	// The ids were validated, so the encoding cannot fail.
	produced := make([]receipt.State, 0, len(states))
	gens := make([]int64, 0, len(states))
	// ends[i] is the end of job i's records in produced.
	ends := make([]int, len(jobs))
	off = 0
	for ji, j := range jobs {
		for i := range j.states {
			st := resolved[off+i]
			switch m := merged[off+i]; {
			case m.Err == nil && m.EpochAhead:
				continue
			case m.Err == nil && m.Stale:
				st = m.State // what Redis holds, in place of the refused mark
			}
			produced = append(produced, st)
			gens = append(gens, seam.GenerationOf(merged[off+i].Generation, merged[off+i].Err))
			j.produced++
		}
		off += len(j.states)
		ends[ji] = len(produced)
	}
	users := make([]string, len(produced))
	for i, st := range produced {
		users[i] = st.Key.User
	}
	g.KnownGenerations(ctx, users, gens)
	recs := event.EncodeReceipts(produced, gens, g.Durable.Topic())
	if len(recs) == 0 {
		finish(producer.Unacknowledged, nil)
		return
	}
	// Each call's records carry its own trace context (none untraced).
	start := 0
	for ji, j := range jobs {
		tracing.Inject(j.ctx, recs[start:ends[ji]])
		start = ends[ji]
	}
	// Redis is done with this flush: the next one may merge while these
	// records wait for their acks, and Redis' replicas for the merges.
	handOff()
	var lagging chan []bool
	if g.Cfg.ReplicaAcks > 0 {
		lagging = make(chan []bool, 1)
		go func() { lagging <- g.Replicated(ctx, usersOf(states)) }()
	}
	dur, err := g.MakeDurable(ctx, recs)
	if lagging != nil {
		<-viewed // the view's publish reads merged
		notReplicated(merged, <-lagging)
		// A merge over a hash an earlier write of the user left behind
		// (after a failover) answers nothing it can stand by.
		behind, all := g.Restore.DegradedBy(ctx, earlier)
		notReplicated(merged, usersIn(states, behind, all))
		// Noted before later calls stop waiting for this one.
		degraded := DegradedUsers(states, merged)
		g.Restore.NoteDegraded(degraded)
		confirmed(degraded)
	}
	finish(dur, err)
}

// usersIn reports, per state, whether its user is in users (every one
// when all).
func usersIn(states []receipt.State, users map[string]bool, all bool) []bool {
	if len(users) == 0 && !all {
		return nil
	}
	in := make([]bool, len(states))
	for i, st := range states {
		in[i] = all || users[st.Key.User]
	}
	return in
}

// notReplicated turns the merges that moved a key whose replicas did not
// take it (lagging[i], Core.Replicated) into Redis failures: the answer
// says realtime_degraded and the user is settled as after any degraded
// write, since a failover may lose what Redis holds.
func notReplicated(merged []cursors.MergeResult, lagging []bool) {
	for i, l := range lagging {
		if l && merged[i].Err == nil && !merged[i].Stale && !merged[i].EpochAhead {
			merged[i].Err = redisstore.ErrNotReplicated
		}
	}
}

// MergeRedis merges the marks (mergeMarksRedis), then publishes their
// public moves to the channels' views (what others may see).
func (g *Marks) MergeRedis(ctx context.Context, states []receipt.State) []cursors.MergeResult {
	merged := g.mergeMarksRedis(ctx, nil, states)
	g.readBy.PublishView(ctx, merged)
	return merged
}

// mergeMarksRedis merges the marks under RedisTimeout, from the stored
// values vals read (nil: it reads them) (redisstore.MergeMarksFrom:
// epochs resolved, stale marks refused). It always returns one result per
// state; failures are per result.
func (g *Marks) mergeMarksRedis(ctx context.Context, vals *cursors.MarkValues, states []receipt.State) []cursors.MergeResult {
	var merged []cursors.MergeResult
	err := g.Restore.SettleDegradedNow(ctx, usersOf(states))
	if err == nil {
		merged, err = g.CursorStore().MergeMarksFrom(ctx, vals, states)
	}
	if len(merged) == len(states) {
		g.restoreAndRemerge(ctx, states, merged)
	}
	if len(merged) != len(states) {
		// Merge gave up before running the pipeline (e.g. reloading scripts).
		if err == nil {
			err = redisstore.ErrUnavailable
		}
		merged = make([]cursors.MergeResult, len(states))
		for i := range merged {
			merged[i].Err = err
		}
	}
	failed := 0
	for i := range merged {
		if merged[i].Err != nil {
			failed++
			if err == nil {
				err = merged[i].Err
			}
		}
	}
	if failed > 0 {
		g.RedisDegradedOn(ctx, seam.RedisOpMerge, failed, err)
	}
	return merged
}

// MergeUnloaded merges, as a repair does (no answer is read from it), the
// states whose merge found their user's hash not loaded and could not
// restore it: Redis then holds what is made durable (the user's next
// restore merges Postgres in and marks the hash loaded), so the stores
// agree without a sweep. Best effort: Redis may be failing.
func (g *Marks) MergeUnloaded(ctx context.Context, merged []cursors.MergeResult, resolved []receipt.State) {
	var states []receipt.State
	for i, r := range merged {
		if errors.Is(r.Err, redisstore.ErrNotLoaded) {
			states = append(states, resolved[i])
		}
	}
	if len(states) == 0 {
		return
	}
	if _, err := g.CursorStore().Merge(ctx, states); err != nil {
		g.WarnRedis(ctx, seam.RedisOpMerge, err)
	}
}

// DegradedUsers are the users of the states whose merge failed: their
// acknowledged writes are in Kafka but not in Redis.
func DegradedUsers(states []receipt.State, merged []cursors.MergeResult) []string {
	var users []string
	for i, r := range merged {
		if r.Err != nil {
			users = append(users, states[i].Key.User)
		}
	}
	return users
}

// restoreAndRemerge restores the users whose marks found their hash not
// loaded (redisstore.ErrNotLoaded: Redis lost it, or it was never
// restored) and merges those marks again, once; what still fails keeps
// its error.
func (g *Marks) restoreAndRemerge(ctx context.Context, states []receipt.State, merged []cursors.MergeResult) {
	var idx []int
	var users []string
	seen := map[string]bool{}
	for i, r := range merged {
		if errors.Is(r.Err, redisstore.ErrNotLoaded) {
			idx = append(idx, i)
			if u := states[i].Key.User; !seen[u] {
				seen[u] = true
				users = append(users, u)
			}
		}
	}
	if len(idx) == 0 {
		return
	}
	if err := g.Restore.Cursors(ctx, users); err != nil {
		g.WarnRedis(ctx, seam.RedisOpRestore, err)
		return
	}
	again := make([]receipt.State, len(idx))
	for j, i := range idx {
		again[j] = states[i]
	}
	res, _ := g.CursorStore().MergeMarksFrom(ctx, nil, again)
	if len(res) != len(again) {
		return
	}
	for j, i := range idx {
		merged[i] = res[j]
	}
}

// checkJobs applies the channel rules (checkMarks) to the calls of a
// flush with one lookup for all of them; a call that fails is answered
// with its error and left out of the returned jobs. The lookup also read
// the keys' stored values, for the merge (vals).
func (g *Marks) checkJobs(jobs []*writeJob) (kept []*writeJob, vals *cursors.MarkValues) {
	var keys []receipt.Key
	ctxs := make([]context.Context, len(jobs))
	for i, j := range jobs {
		for _, m := range j.marks {
			keys = append(keys, m.Key)
		}
		ctxs[i] = j.ctx
	}
	ctx, cancel := batchContext(ctxs)
	defer cancel()
	users := make([]string, len(keys))
	for i, k := range keys {
		users[i] = k.User
	}
	// Users with degraded writes are unloaded first (else the merge fails
	// them: mergeMarksRedis settles them again).
	_ = g.Restore.SettleDegradedNow(ctx, users)
	f, vals := g.LookupForWrite(ctx, keys)
	if !f.Known {
		return jobs, vals
	}
	refuse := func(j *writeJob, err error) {
		j.err = err
		close(j.done)
	}
	kept = jobs[:0]
	for _, j := range jobs {
		if err := g.checkEach(f, j.marks); err != nil {
			refuse(j, err)
			continue
		}
		kept = append(kept, j)
	}
	// Calls with users whose cursors Redis lost (or never restored) leave
	// the flush: their users are restored beside it, off the flush's Redis
	// stage, and the calls come back in a later one, so that their epoch
	// checks and merges act on what the durable path holds. A call that
	// comes back still unloaded (its restore failed) merges anyway: its
	// marks degrade (restoreAndRemerge), still made durable.
	if unloaded := vals.Unloaded(); len(unloaded) > 0 {
		lost := make(map[string]bool, len(unloaded))
		for _, u := range unloaded {
			lost[u] = true
		}
		stay := kept[:0]
		for _, j := range kept {
			if users := j.usersIn(lost); len(users) > 0 && !j.restored {
				g.bounce(j, users)
				continue
			}
			stay = append(stay, j)
		}
		kept = stay
		vals.Forget(unloaded)
	}
	checked := kept[:0]
	for _, j := range kept {
		if err := checkEpochs(vals, j.marks, j.states); err != nil {
			refuse(j, err)
			continue
		}
		checked = append(checked, j)
	}
	return checked, vals
}

// usersIn lists the users of j's marks that lost names.
func (j *writeJob) usersIn(lost map[string]bool) []string {
	var users []string
	for _, m := range j.marks {
		if lost[m.Key.User] && !slices.Contains(users, m.Key.User) {
			users = append(users, m.Key.User)
		}
	}
	return users
}

// bounce restores users beside the flush, then submits j again, once.
func (g *Marks) bounce(j *writeJob, users []string) {
	j.restored = true
	go func() {
		g.Restore.Slots <- struct{}{}
		err := g.Restore.Cursors(j.ctx, users)
		<-g.Restore.Slots
		if err != nil {
			g.WarnRedis(j.ctx, seam.RedisOpRestore, err)
		}
		if err := g.writes.submit(j); err != nil {
			j.err = g.Unavailable(j.ctx, len(j.states), err)
			close(j.done)
		}
	}()
}

// usersOf lists the users of states.
func usersOf(states []receipt.State) []string {
	users := make([]string, len(states))
	for i, st := range states {
		users[i] = st.Key.User
	}
	return users
}
