package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
)

// loadShape is the mixed workload a fault run keeps on a stack: the mark
// clients (w; its pause also paces the ops clients) and the noticer.
type loadShape struct {
	w       workload
	notices noticeLoad
}

// faultLoad is the load of each fault scenario: as fast as the clients go.
var faultLoad = loadShape{
	w: workload{clients: 4, users: 60, channels: 10, batch: 25, dup: 0.2, reorder: 0.15,
		private: 0.1, epoch: 0.2, retry: true},
	notices: noticeLoad{channels: 6, users: 20, clients: 2},
}

// load is a loadShape running: every call recorded in a model and a
// history, and a sampler reading both stores.
type load struct {
	m   *model
	h   *history
	d   *driver
	o   *ops
	smp *sampler
	nt  *noticer
	th  *threader
	// lz, when running, is the linearizability workload (linear_test.go).
	lz *linearizer
}

// startLoad starts the shape's load on s, and with linear the
// linearizability workload beside it.
func startLoad(t *testing.T, s *stack, shape loadShape, linear bool) *load {
	t.Helper()
	l := &load{m: newModel(), h: newHistory()}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	if linear {
		l.lz = startLinearizer(s.apiAddr, linearDefault, seed+400)
	}
	l.d = startRecordingDriver(s.apiAddr, shape.w, l.m, l.h, seed)
	l.o = startOps(s.apiAddr, l.d, l.h, seed+100)
	l.smp = startSampler(s, l.m)
	l.nt = startNoticer(s.apiAddr, shape.notices, l.h, seed+200)
	l.th = startThreader(t, s.apiAddr, seed+300)
	return l
}

// redisLost marks a moment Redis lost its data, once before the fault and
// once after: the sampler's memory of raw Redis values starts over (a
// lower value in Redis itself is the loss, which the gateway restores
// before anyone is answered from it). Nothing an API read answers is
// excused.
func (l *load) redisLost() {
	l.smp.resetRedis()
}

// finish stops the load, waits for quiet and runs every check: the stores
// against the model, the counts against the notice model, the history
// checker, and (swept: the reconciler's drift sweep ran) what the sweep
// repaired into Postgres.
//
// With sweepAtEnd (a Redis loss without the reconciler's sweep), a sweep
// of the test's own makes Redis agree with Postgres on the keys nobody
// used again once the persister is quiet; it must repair nothing into
// Postgres.
func (l *load) finish(t *testing.T, s *stack, name string, swept, sweepAtEnd bool) result {
	t.Helper()
	var lv *linearVerdict
	if l.lz != nil {
		v := l.lz.finish()
		t.Logf("linearizability: %s; %d calls, %d failed, %d degraded", v, l.lz.calls.Load(), l.lz.failed.Load(), l.lz.degraded.Load())
		lv = &v
	}
	l.d.halt()
	l.o.halt()
	l.nt.halt()
	l.th.halt()
	sweptIntoPG := -1
	if sweepAtEnd {
		sweptIntoPG = s.sweepOnce(t)
	}
	acked := l.m.snapshot()
	took, v := s.waitConverged(context.Background(), acked, 180*time.Second)
	l.smp.halt()
	if v.lost > 0 || v.diverged > 0 {
		t.Logf("first problem: %s", v.firstProblem)
	}
	// Once quiet, the counts (from Redis, rebuilt from Postgres where
	// Redis lost them) match the notice model.
	mismatches, deadline := -1, time.Now().Add(60*time.Second)
	var first []string
	for {
		n, f, err := l.nt.check(context.Background(), s.store)
		if err == nil {
			mismatches, first = n, f
		}
		if mismatches == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond) // poll with a deadline
	}
	if mismatches != 0 {
		t.Logf("count mismatches (%d): %v", mismatches, first)
	}
	// Threads: counts from the API equal the thread model, and Postgres
	// holds every acknowledged thread write (persister lag: poll).
	threadMismatches, tdeadline := -1, time.Now().Add(60*time.Second)
	for {
		counts, behind, f, err := l.th.check(context.Background(), s.store)
		if err == nil {
			threadMismatches, first = counts+behind, f
		}
		if threadMismatches == 0 || time.Now().After(tdeadline) {
			break
		}
		time.Sleep(250 * time.Millisecond) // poll with a deadline
	}
	if threadMismatches != 0 {
		t.Logf("thread mismatches (%d): %v", threadMismatches, first)
	}
	// The history: every acknowledged write on the topic and in Postgres,
	// no read backwards. Spooled writes may still be on their way to the
	// topic: poll with a deadline.
	var hv historyVerdict
	hdeadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		hv, err = s.checkHistory(context.Background(), l.h)
		require.NoError(t, err)
		if (hv.missing == 0 && hv.lost == 0) || time.Now().After(hdeadline) {
			break
		}
		time.Sleep(time.Second) // poll with a deadline
	}
	if len(hv.problems) > 0 {
		t.Logf("history problems: %v", hv.problems)
	}
	if swept {
		sweptIntoPG = s.sweptIntoPostgres(t)
	}
	l.h.mu.Lock()
	kafka, spooled := l.h.durability["KAFKA"], l.h.durability["SPOOLED"]
	l.h.mu.Unlock()
	t.Logf("history: %d writes acknowledged (%d KAFKA, %d SPOOLED), %d reads, %d records on the topic; ops %v",
		hv.writes, kafka, spooled, hv.reads, hv.records, l.o.summary())
	return result{
		name: name, acked: l.m.n, lost: v.lost + v.diverged, regressed: int(l.smp.regressed.Load() + l.th.regressed.Load()),
		converge: took, deadLetters: s.deadLetters(), spooled: l.d.spooled.Load(), callErrs: l.d.errs.Load() + l.o.errs.Load(),
		notices: int(l.nt.acked.Load()), levelSets: int(l.nt.levelsAcked.Load()), countMismatches: mismatches,
		threadCalls: int(l.th.acked.Load()), threadMismatches: threadMismatches,
		hist: hv, sweptIntoPG: sweptIntoPG, kafka: kafka, spooledAll: spooled, ops: l.o.summary(), linear: lv,
	}
}

// killAndRestart kills a service with SIGKILL, as a crash would, and
// starts it again at once.
func killAndRestart(t *testing.T, s *stack, p *proc) {
	t.Helper()
	p.kill9()
	p.start(t)
	s.waitReady(p)
}

// bounceBroker kills the broker, keeps it down for down, and starts it
// again on its data directory.
func bounceBroker(t *testing.T, s *stack, down time.Duration) {
	t.Helper()
	s.broker.kill9()
	time.Sleep(down) // the fault's duration
	s.broker.start(t)
	s.waitBroker()
}

// bounceRedis stops the stack's Redis, keeps it down for down, and starts
// it again empty (it has no persistence).
func bounceRedis(t *testing.T, s *stack, down time.Duration) {
	t.Helper()
	s.redisServer.Stop()
	time.Sleep(down) // the fault's duration
	s.redisServer.Start(t)
}

// sweepOnce waits for the persister to be quiet, then runs one drift sweep
// that repairs both ways, and returns how many keys it repaired into
// Postgres.
func (s *stack) sweepOnce(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		lag, err := s.lag(ctx)
		return err == nil && lag == 0
	}, 120*time.Second, 250*time.Millisecond, "the persister catches up")
	sw, err := drift.New(drift.Config{Postgres: s.store, Redis: s.rstore, Grace: -1, PagesPerSecond: 1e6, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	t.Logf("the sweep after the load: found %+v, repaired %+v", rep.Found, rep.Repaired)
	return rep.Repaired.RedisAhead + rep.Repaired.PostgresMissing
}
