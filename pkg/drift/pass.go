package drift

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/views/readby"
)

// Every kind of state is swept the same two ways, by its own merge rule
// (kind.Spec): Postgres in key order, each page's keys read from Redis;
// then Redis in SCAN pages, each value Postgres has no row for compared
// (a key in both stores was compared by the Postgres walk). A repair
// always writes the merge of both sides, so it can only move a store
// forward. A Redis value ahead of Postgres whose time is within the grace
// period is in flight (the write path is persisting it), not drift.

// SweepOnce runs one full, synchronous pass over every kind, both ways.
// It stops at the first store failure and returns the report so far with
// the error.
func (s *Sweeper) SweepOnce(ctx context.Context) (Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := Report{Started: s.now()}
	s.pass++
	// A burst of 1 spaces pages evenly, 1/PagesPerSecond apart.
	lim := rate.NewLimiter(rate.Limit(s.cfg.PagesPerSecond), 1)
	var err error
	if !s.cfg.DryRun {
		// An erasure cut short (its caller gave up, its gateway stopped)
		// is finished here, whoever retries it or not.
		rep.ErasuresFinished, err = s.cfg.Redis.FinishErasures(ctx, readby.NewStore(nil, s.cfg.Redis).Redact(s.now().UnixMilli(), kind.RedisRedact(s.kinds, &s.env)))
		if rep.ErasuresFinished > 0 {
			s.log.Info("finished erasures cut short", zap.Int("channels", rep.ErasuresFinished))
		}
	}
	for _, k := range s.kinds {
		if err != nil {
			break
		}
		if err = s.sweepPostgres(ctx, lim, &rep, k); err != nil {
			break
		}
		if err = s.sweepRedis(ctx, lim, &rep, k); err != nil {
			break
		}
	}
	rep.Duration = time.Since(rep.Started)
	if err == nil {
		s.forgetSettled()
	}
	if ctx.Err() != nil {
		// Stopped (shutdown, leadership lost): neither a failure nor a sweep.
		return rep, err
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.m.sweeps.WithLabelValues(result).Inc()
	s.m.duration.Observe(rep.Duration.Seconds())
	return rep, err
}

// work is the work found in one page of one kind.
type work struct {
	kind            kind.Kind
	found           Counts
	samples         []Sample
	sampleRoom      int // what the report can still take: no value is formatted to be dropped
	inFlight        int
	toPG, toRedis   []any
	dirPG, dirRedis []string // direction of each repair, for counting
}

// compare classifies one key: pg is its Postgres row (nil: none), copies
// what Redis holds of it (nil entries: absent). It queues the repairs.
func (s *Sweeper) compare(w *work, key, pg any, copies []any) {
	k := w.kind
	merged, redisMerged := k.ZeroOf(key), k.ZeroOf(key)
	present := pg != nil
	if pg != nil {
		merged = k.MergeValues(&s.env, merged, pg)
	}
	for _, c := range copies {
		if c != nil {
			present = true
			merged = k.MergeValues(&s.env, merged, c)
			redisMerged = k.MergeValues(&s.env, redisMerged, c)
		}
	}
	if !present {
		return
	}
	redisAhead := !k.IsEmpty(merged) && (pg == nil || !k.SameValues(merged, pg))
	// Redis' copies alone make the merge: what is ahead is all Redis'.
	redisOnly := k.SameValues(merged, redisMerged)
	if redisAhead && !s.settled(k, key, merged) {
		w.inFlight++
		if redisOnly {
			return
		}
		redisAhead = false
	}
	if redisAhead {
		dir := DirRedisAhead
		if pg == nil {
			dir = DirPostgresMissing
		}
		w.found.add(dir, 1)
		w.sample(dir, key, pg, copies)
		w.toPG, w.dirPG = append(w.toPG, merged), append(w.dirPG, dir)
	}
	for _, c := range copies {
		if c != nil && k.SameValues(merged, c) {
			continue
		}
		if c == nil && pg == nil && !redisAhead {
			continue
		}
		dir := DirPostgresAhead
		switch {
		case redisAhead && redisOnly:
			dir = DirRedisAhead // one Redis copy ahead of another: the merge brings both along
		case c == nil:
			dir = DirRedisMissing
		}
		w.found.add(dir, 1)
		w.sample(dir, key, pg, copies)
		w.toRedis, w.dirRedis = append(w.toRedis, merged), append(w.dirRedis, dir)
		return // one merge writes every copy
	}
}

// sample keeps a disagreement for the report while it has room.
func (w *work) sample(dir string, key, pg any, copies []any) {
	if len(w.samples) >= w.sampleRoom {
		return
	}
	w.samples = append(w.samples, Sample{Kind: w.kind.Name(), Direction: dir, Key: fmt.Sprintf("%+v", key),
		Postgres: fmt.Sprintf("%+v", pg), Redis: fmt.Sprintf("%+v", copies)})
}

func (s *Sweeper) graceOver(ms int64) bool {
	return s.cfg.Grace < 0 || ms <= 0 || s.now().Sub(time.UnixMilli(ms)) >= s.cfg.Grace
}

// settled reports whether merged, ahead of Postgres by Redis' copies, is
// no longer in flight: its time is Grace old, or — a kind whose values
// carry no time (mentions, which the persister may not have written yet)
// — passes have found it ahead, with the same value, for Grace.
func (s *Sweeper) settled(k kind.Kind, key, merged any) bool {
	if s.cfg.Grace < 0 {
		return true
	}
	if ms := k.TimeOf(merged); ms > 0 {
		return s.graceOver(ms)
	}
	id := k.Name() + "\x00" + fmt.Sprint(key)
	now := s.now()
	s.aheadMu.Lock()
	defer s.aheadMu.Unlock()
	a, ok := s.ahead[id]
	if !ok || !k.SameValues(a.value, merged) {
		// New, or Redis moved again since: a hot key under a lagging
		// persister stays ahead with new values, each of them in flight.
		a.first, a.value = now, merged
	}
	a.pass = s.pass
	s.ahead[id] = a
	return now.Sub(a.first) >= s.cfg.Grace
}

// forgetSettled forgets the keys the last pass did not find ahead.
func (s *Sweeper) forgetSettled() {
	s.aheadMu.Lock()
	defer s.aheadMu.Unlock()
	for id, a := range s.ahead {
		if a.pass != s.pass {
			delete(s.ahead, id)
		}
	}
}

// sweepPostgres walks a kind's Postgres rows in key order; each page's
// keys are read from Redis in one pipeline.
func (s *Sweeper) sweepPostgres(ctx context.Context, lim *rate.Limiter, rep *Report, k kind.Kind) error {
	if dk := k.Digested(); dk != nil {
		return s.sweepPostgresDigests(ctx, lim, rep, k, dk)
	}
	var after any
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		page, err := k.PagePG(ctx, &s.env, after, s.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("reading a postgres page of %s: %w", k.Name(), err)
		}
		rep.Pages++
		if len(page) == 0 {
			return nil
		}
		rep.PostgresRows += len(page)
		keys := make([]any, len(page))
		for i, v := range page {
			keys[i] = k.KeyOf(v)
		}
		after = keys[len(keys)-1]
		held, err := k.GetRedis(ctx, &s.env, keys)
		if err != nil {
			return fmt.Errorf("reading %d redis values of %s: %w", len(keys), k.Name(), err)
		}
		w := &work{kind: k, sampleRoom: MaxSamples - len(rep.Samples)}
		for i := range page {
			s.compare(w, keys[i], page[i], held[i])
		}
		if err := s.apply(ctx, w, rep); err != nil {
			return err
		}
		if len(page) < s.cfg.PageSize {
			return nil
		}
	}
}

// sweepRedis walks a kind's Redis values in bounded SCAN pages (in Redis
// Cluster, every master in turn); each page's keys are looked up in
// Postgres in one statement per pgPageChunk keys.
func (s *Sweeper) sweepRedis(ctx context.Context, lim *rate.Limiter, rep *Report, k kind.Kind) error {
	if dk := k.Digested(); dk != nil {
		return s.sweepRedisDigests(ctx, lim, rep, k, dk)
	}
	var cursor redisstore.ScanCursor
	for {
		if err := s.pageWait(ctx, lim); err != nil {
			return err
		}
		page, err := k.ScanRedis(ctx, &s.env, cursor, s.cfg.ScanCount)
		if err != nil {
			return fmt.Errorf("scanning redis %s (%s): %w", k.Name(), cursor, err)
		}
		rep.Pages++
		rep.RedisUsers += page.Scanned
		rep.RedisFields += len(page.Values) + page.Invalid
		rep.Invalid += page.Invalid
		inPG := map[any]any{}
		for start := 0; start < len(page.Values); start += pgPageChunk {
			chunk := page.Values[start:min(start+pgPageChunk, len(page.Values))]
			keys := make([]any, len(chunk))
			for i, v := range chunk {
				keys[i] = k.KeyOf(v)
			}
			rows, err := k.GetPG(ctx, &s.env, keys)
			if err != nil {
				return fmt.Errorf("reading postgres rows of %d keys of %s: %w", len(keys), k.Name(), err)
			}
			for _, r := range rows {
				inPG[k.KeyOf(r)] = r
			}
		}
		w := &work{kind: k, sampleRoom: MaxSamples - len(rep.Samples)}
		for _, v := range page.Values {
			if key := k.KeyOf(v); inPG[key] == nil {
				s.compare(w, key, nil, []any{v})
			}
		}
		if err := s.apply(ctx, w, rep); err != nil {
			return err
		}
		if cursor = page.Next; cursor.Done() {
			return nil
		}
	}
}

// apply writes a page's repairs, each a merge, and counts them: one
// Postgres statement (row by row when it is rejected, so one bad row
// costs only itself) and one Redis pipeline. Repairs of erased users are
// not written (erased.go).
func (s *Sweeper) apply(ctx context.Context, w *work, rep *Report) error {
	rep.Found.merge(w.found)
	rep.byKind(w.kind.Name()).merge(w.found)
	rep.Samples = append(rep.Samples, w.samples...)
	rep.InFlight += w.inFlight
	s.m.inFlight.Add(float64(w.inFlight))
	for _, d := range directions {
		if n := countDir(w.found, d); n > 0 {
			s.m.found.WithLabelValues(d).Add(float64(n))
		}
	}
	if len(w.toPG) == 0 && len(w.toRedis) == 0 || s.cfg.DryRun {
		return nil
	}
	erased, err := s.dropErased(ctx, w)
	if err != nil {
		rep.Failed += len(w.toPG) + len(w.toRedis)
		return fmt.Errorf("reading the tombstones of a page: %w", err)
	}
	rep.Erased += erased
	if err := s.repairPostgres(ctx, w, rep); err != nil {
		return err
	}
	return s.repairRedis(ctx, w, rep)
}

func (s *Sweeper) repairPostgres(ctx context.Context, w *work, rep *Report) error {
	if len(w.toPG) == 0 {
		return nil
	}
	k := w.kind
	_, err := k.WritePG(ctx, &s.env, w.toPG)
	if err == nil {
		for _, d := range w.dirPG {
			s.repaired(rep, d)
		}
		return nil
	}
	if pgstore.Classify(err) != errclass.Rejected {
		rep.Failed += len(w.toPG)
		return fmt.Errorf("repairing %d postgres rows of %s: %w", len(w.toPG), k.Name(), err)
	}
	for i, v := range w.toPG {
		key := k.RecordKeyOf(k.KeyOf(v))
		if _, err := k.WritePG(ctx, &s.env, []any{v}); err != nil {
			rep.Failed++
			s.log.Warn("repairing a postgres row", zap.String("kind", k.Name()), zap.String("key", key), zap.Error(err))
			if pgstore.Classify(err) != errclass.Rejected {
				return fmt.Errorf("repairing the postgres row %s of %s: %w", key, k.Name(), err)
			}
			continue
		}
		s.repaired(rep, w.dirPG[i])
	}
	return nil
}

func (s *Sweeper) repairRedis(ctx context.Context, w *work, rep *Report) error {
	if len(w.toRedis) == 0 {
		return nil
	}
	k := w.kind
	errs, err := k.WriteRedis(ctx, &s.env, w.toRedis)
	if err != nil && errs == nil {
		rep.Failed += len(w.toRedis)
		return fmt.Errorf("repairing %d redis values of %s: %w", len(w.toRedis), k.Name(), err)
	}
	for i := range w.toRedis {
		if i < len(errs) && errs[i] != nil {
			rep.Failed++
			s.log.Warn("repairing a redis value", zap.String("kind", k.Name()),
				zap.String("key", k.RecordKeyOf(k.KeyOf(w.toRedis[i]))), zap.Error(errs[i]))
			continue
		}
		s.repaired(rep, w.dirRedis[i])
	}
	if err != nil {
		return fmt.Errorf("repairing %d redis values of %s: %w", len(w.toRedis), k.Name(), err)
	}
	return nil
}

func (s *Sweeper) repaired(rep *Report, dir string) {
	rep.Repaired.add(dir, 1)
	s.m.repaired.WithLabelValues(dir).Inc()
}

// pageWait waits for the page rate and, with leader election, checks that
// this replica still leads (before every page).
func (s *Sweeper) pageWait(ctx context.Context, lim *rate.Limiter) error {
	if err := lim.Wait(ctx); err != nil {
		return err
	}
	return s.checkGuard(ctx)
}

// byKind returns the kind's counts, created on first use.
func (r *Report) byKind(kind string) *Counts {
	if r.ByKind == nil {
		r.ByKind = map[string]*Counts{}
	}
	c := r.ByKind[kind]
	if c == nil {
		c = &Counts{}
		r.ByKind[kind] = c
	}
	return c
}

var directions = []string{DirRedisAhead, DirPostgresAhead, DirRedisMissing, DirPostgresMissing}

func countDir(c Counts, dir string) int {
	switch dir {
	case DirRedisAhead:
		return c.RedisAhead
	case DirPostgresAhead:
		return c.PostgresAhead
	case DirRedisMissing:
		return c.RedisMissing
	case DirPostgresMissing:
		return c.PostgresMissing
	}
	return 0
}
