package e2e

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
)

// updateDoc rewrites the results table of docs/faults.md from this run
// (go test ./e2e -run TestFaults -update-doc, or make faults-doc).
var updateDoc = flag.Bool("update-doc", false, "write the fault suite's results table into docs/faults.md")

// scenario is one injected fault.
type scenario struct {
	name string
	// poison is how many records the scenario itself dead-letters on purpose.
	poison int
	// inject runs while the load is running.
	inject func(t *testing.T, s *stack)
	// redisLoss: Redis loses data in this scenario. Nothing is excused
	// for it: every read through the API is held to every earlier one,
	// and the linearizability checker runs over a workload of its own.
	// Only the sampler's memory of raw Redis values starts over (a lower
	// value in Redis itself is the loss, which the gateway restores).
	redisLoss bool
	// sweep runs the reconciler's drift sweep during the load (it must
	// repair nothing into Postgres). Without it, a sweep of the test's own
	// runs once the load has stopped, to make the stores agree on the
	// keys nobody read again, and must repair nothing into Postgres either.
	sweep bool
}

// result is one row of the table.
type result struct {
	name              string
	acked             int
	lost, regressed   int
	converge          time.Duration
	deadLetters       int64
	spooled, callErrs int64
	// notices and notification-level changes acknowledged, and (user,
	// channel) counts, levels, badges or Postgres registers that did not
	// match the notice model once quiet.
	notices, levelSets, countMismatches int
	// thread calls acknowledged, and threads whose counts (from the API)
	// or durable state (in Postgres) differ from the thread model once quiet.
	threadCalls, threadMismatches int
	// the history checker's verdict, and the drift sweep's repairs into
	// Postgres (-1: the sweep was off).
	hist        historyVerdict
	sweptIntoPG int
	// linear is the linearizability checker's verdict (nil: not run).
	linear            *linearVerdict
	kafka, spooledAll int
	ops               map[string]int64
}

// faultScenarios are every scenario of the suite, all run in CI. Each
// stack has its own Postgres and Redis servers (own ports and data
// directories), so stopping them touches none of the machine's services.
// Each way Redis loses data runs with the reconciler's drift sweep and
// without it (a restart empty: "stop Redis 20s, start" with it): what the
// API answers must never depend on the sweep.
func faultScenarios() []scenario {
	out := []scenario{
		{name: "kill -9 persister mid-batch, restart", inject: func(t *testing.T, s *stack) {
			killAndRestart(t, s, s.persister)
		}},
		{name: "kill -9 kafkagate mid-load, restart", inject: func(t *testing.T, s *stack) {
			killAndRestart(t, s, s.gate)
		}},
		{name: "restart Postgres", inject: func(t *testing.T, s *stack) {
			s.pgServer.Restart(t)
		}},
		{name: "stop Postgres 30s, start", inject: func(t *testing.T, s *stack) {
			s.pgServer.Stop()
			time.Sleep(30 * time.Second) // the fault's duration
			s.pgServer.Start(t)
		}},
		// Redis restarted empty, with the sweep (and 20 s of it away).
		{name: "stop Redis 20s, start", redisLoss: true, sweep: true, inject: func(t *testing.T, s *stack) {
			bounceRedis(t, s, 20*time.Second)
		}},
		{name: "Redis restarted empty, no sweep", redisLoss: true, inject: func(t *testing.T, s *stack) {
			bounceRedis(t, s, 0)
		}},
		{name: "stop Kafka broker 20s, restart on its data dir", inject: func(t *testing.T, s *stack) {
			bounceBroker(t, s, 20*time.Second)
		}},
		{name: "poison records from a foreign client", poison: 3, inject: func(t *testing.T, s *stack) {
			producePoison(t, s)
		}},
		{name: "re-deliver the topic from an old offset", inject: func(t *testing.T, s *stack) {
			rewindPersister(t, s)
		}},
	}
	losses := []scenario{
		{name: "FLUSHALL Redis", inject: func(t *testing.T, s *stack) {
			require.NoError(t, s.rdb.FlushAll(context.Background()).Err())
		}},
		{name: "Redis evicts keys", inject: evictRedis},
	}
	for _, l := range losses {
		for _, sweep := range []bool{true, false} {
			sc := l
			sc.redisLoss, sc.sweep = true, sweep
			if !sweep {
				sc.name += ", no sweep"
			}
			out = append(out, sc)
		}
	}
	return out
}

// evictRedis makes the stack's Redis evict keys, as one short of memory
// does: maxmemory below what it holds, with allkeys-lru, until it has
// evicted some, then back to no limit.
func evictRedis(t *testing.T, s *stack) {
	ctx := context.Background()
	info, err := s.rdb.Info(ctx, "memory").Result()
	require.NoError(t, err)
	used := infoInt(t, info, "used_memory")
	require.NoError(t, s.rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	require.NoError(t, s.rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used*3/4, 10)).Err())
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := s.rdb.Info(ctx, "stats").Result()
		require.NoError(t, err)
		if infoInt(t, st, "evicted_keys") >= 50 {
			break
		}
		require.True(t, time.Now().Before(deadline), "Redis evicted fewer than 50 keys in 30s")
		time.Sleep(50 * time.Millisecond) // poll with a deadline
	}
	require.NoError(t, s.rdb.ConfigSet(ctx, "maxmemory", "0").Err())
}

func infoInt(t *testing.T, info, field string) int64 {
	t.Helper()
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("INFO has no %s", field)
	return 0
}

// TestFaults runs every scenario (make faults; part of make ci).
func TestFaults(t *testing.T) {
	// Beside the soak (TestSoak), within -parallel: the suite's slots are
	// shared, so make faults takes the longer of the two, not their sum.
	t.Parallel()
	start := time.Now()
	scenarios := faultScenarios()
	// The scenarios run side by side, -parallel at a time (each on servers
	// of its own; most of a scenario is waiting out its fault); the table
	// keeps their order.
	results := make([]result, len(scenarios))
	ran := make([]bool, len(scenarios))
	t.Cleanup(func() {
		var done []result
		for i, r := range results {
			if ran[i] {
				done = append(done, r)
			}
		}
		took := time.Since(start)
		table := formatTable(done)
		t.Logf("\n%s\nsuite: %s", table, took.Round(time.Second))
		if out := os.Getenv("RECEIPTS_FAULTS_TABLE"); out != "" {
			f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			require.NoError(t, err)
			fmt.Fprintf(f, "\nRun at %s:\n\n%s", time.Now().UTC().Format(time.RFC3339), table)
			f.Close()
		}
		if *updateDoc {
			require.False(t, t.Failed(), "the table is written only from a passing run")
			require.Len(t, done, len(scenarios), "the table is written only from a run of every scenario")
			writeFaultsDoc(t, table, took)
		}
	})
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			r := runScenario(t, sc)
			results[i], ran[i] = r, true
			requireNoLoss(t, r, sc.poison)
		})
	}
}

func runScenario(t *testing.T, sc scenario) result {
	s := newStack(t, stackOptions{spool: true, ownServers: true, noSweep: !sc.sweep})
	l := startLoad(t, s, faultLoad, sc.redisLoss)
	waitAcked(t, l.m, 2000, 60*time.Second)
	l.th.waitAcked(t, 150, 60*time.Second)
	before, threadsBefore := l.m.n, l.th.acked.Load()
	if sc.redisLoss {
		l.redisLost()
	}
	sc.inject(t, s)
	if sc.redisLoss {
		l.redisLost()
	}
	// Keep the load on until the system has acknowledged more after the fault.
	waitAcked(t, l.m, before+2000, 120*time.Second)
	l.th.waitAcked(t, threadsBefore+150, 120*time.Second)
	if l.lz != nil {
		l.lz.waitOps(t, l.lz.recorded()+linearAfterFault, 120*time.Second)
	}
	return l.finish(t, s, sc.name, sc.sweep, sc.redisLoss && !sc.sweep)
}

// requireNoLoss holds a finished run to the invariants: nothing lost or
// regressed, counts exact, no dead letter but the poison records the run
// produced itself, and no repair of Postgres from Redis.
func requireNoLoss(t *testing.T, r result, poison int) {
	t.Helper()
	require.Zero(t, r.lost, "lost acknowledged writes")
	require.Zero(t, r.regressed, "regressions")
	require.Zero(t, r.countMismatches, "counts, levels or badges differ from the notice model, or Postgres lacks a level")
	require.Zero(t, r.threadMismatches, "thread counts or Postgres differ from the thread model")
	require.EqualValues(t, poison, r.deadLetters, "dead letters: an outage must not dead-letter good records")
	require.Zero(t, r.hist.missing, "acknowledged writes missing from the topic: %v", r.hist.problems)
	require.Zero(t, r.hist.lost, "keys where Postgres holds less than acknowledged: %v", r.hist.problems)
	require.Zero(t, r.hist.regressed, "reads through the API that went backwards: %v", r.hist.problems)
	require.LessOrEqual(t, r.sweptIntoPG, 0, "the drift sweep repaired Postgres from Redis: the durable path lost what it did")
	if r.linear != nil {
		require.True(t, r.linear.ok(), "marks, mark-unreads and reads are not linearizable: %s", r.linear)
	}
}

// sweptIntoPostgres is how many keys the reconciler's drift sweep repaired
// in Postgres from Redis (receipts_reconciler_drift_repaired_total with
// direction redis_ahead or postgres_missing on its admin port).
func (s *stack) sweptIntoPostgres(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + s.admin["dlt-reconciler"] + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(promodel.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	mf := families["receipts_reconciler_drift_repaired_total"]
	require.NotNil(t, mf, "the reconciler exports no drift_repaired_total")
	n := 0
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "direction" && (l.GetValue() == drift.DirRedisAhead || l.GetValue() == drift.DirPostgresMissing) {
				n += int(m.GetCounter().GetValue())
			}
		}
	}
	return n
}

func formatTable(rs []result) string {
	var b strings.Builder
	b.WriteString("| scenario | marks acknowledged | writes in the history (KAFKA / SPOOLED) | API reads checked | not on the topic | behind in Postgres | reads backwards | lost | regressed | seconds to converge | dead letters | spooled | failed calls | notices acknowledged | level changes acknowledged | count mismatches | thread calls acknowledged | thread mismatches | sweep repairs into Postgres | linearizable (operations) |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rs {
		sweep := "off"
		if r.sweptIntoPG >= 0 {
			sweep = strconv.Itoa(r.sweptIntoPG)
		}
		linear := "not run"
		if r.linear != nil {
			linear = fmt.Sprintf("%s (%d)", r.linear.result, r.linear.ops)
		}
		fmt.Fprintf(&b, "| %s | %d | %d (%d / %d) | %d | %d | %d | %d | %d | %d | %.1f | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s |\n", r.name, r.acked,
			r.hist.writes, r.kafka, r.spooledAll, r.hist.reads, r.hist.missing, r.hist.lost, r.hist.regressed, r.lost, r.regressed,
			r.converge.Seconds(), r.deadLetters, r.spooled, r.callErrs, r.notices, r.levelSets, r.countMismatches, r.threadCalls, r.threadMismatches, sweep, linear)
	}
	return b.String()
}

// deadLetters counts the records on the dead-letter topic.
func (s *stack) deadLetters() int64 {
	ends, err := kadm.NewClient(s.kcl).ListEndOffsets(context.Background(), s.dltTopic)
	if err != nil {
		return -1
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// sampler reads a sample of keys from both stores during a scenario and
// counts every time a store answers a key lower than it answered before.
type sampler struct {
	s         *stack
	m         *model
	stop      chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex
	pgSeen    map[receipt.Key]receipt.State
	redisSeen map[receipt.Key]receipt.State
	regressed atomic.Int64
}

func startSampler(s *stack, m *model) *sampler {
	smp := &sampler{s: s, m: m, stop: make(chan struct{}), pgSeen: map[receipt.Key]receipt.State{}, redisSeen: map[receipt.Key]receipt.State{}}
	smp.wg.Add(1)
	go smp.loop()
	return smp
}

func (smp *sampler) halt() { close(smp.stop); smp.wg.Wait() }

// resetRedis forgets what Redis answered: after Redis loses its data, a
// lower value there is the loss itself, repaired by the read path and the
// sweep, not a write that moved a key backwards.
func (smp *sampler) resetRedis() {
	smp.mu.Lock()
	smp.redisSeen = map[receipt.Key]receipt.State{}
	smp.mu.Unlock()
}

func (smp *sampler) loop() {
	defer smp.wg.Done()
	ctx := context.Background()
	for {
		select {
		case <-smp.stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		users := map[string]bool{}
		for k := range smp.m.snapshot() {
			users[k.User] = true
			if len(users) >= 20 {
				break
			}
		}
		for u := range users {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			pg, perr := cursors.NewPostgres(smp.s.store).Get(qctx, u, nil)
			rd, _, rerr := cursors.NewStore(smp.s.rstore).Get(qctx, u, nil)
			cancel()
			smp.mu.Lock()
			if perr == nil {
				smp.observe(smp.pgSeen, pg)
			}
			if rerr == nil {
				smp.observe(smp.redisSeen, rd)
			}
			smp.mu.Unlock()
		}
	}
}

func (smp *sampler) observe(seen map[receipt.Key]receipt.State, states []receipt.State) {
	for _, st := range states {
		prev, ok := seen[st.Key]
		if ok && !st.Covers(prev) {
			smp.regressed.Add(1)
		}
		merged, _ := receipt.Merge(prev, st)
		seen[st.Key] = merged
	}
}

// producePoison writes three bad records straight to the topic with kcat (a
// librdkafka client, not ours): garbage bytes, a valid event with an invalid
// id, and an event of an unknown schema version. Without kcat it falls back
// to a raw franz-go client and says so.
func producePoison(t *testing.T, s *stack) {
	t.Helper()
	good := receipt.State{Key: receipt.Key{User: "poison", Channel: "c"},
		Read: receipt.Cursor{Position: receipt.Position{Seq: 1}}, Delivered: receipt.Cursor{Position: receipt.Position{Seq: 1}}}
	invalid := event.ToProto(good)
	invalid.UserId = "bad id\x01"
	invalidBytes, err := proto.Marshal(invalid)
	require.NoError(t, err)
	future := event.ToProto(good)
	future.SchemaVersion = 99
	futureBytes, err := proto.Marshal(future)
	require.NoError(t, err)
	records := []struct{ key, value []byte }{
		{[]byte("poison:garbage"), []byte{0xde, 0xad, 0xbe, 0xef, 0xff, 0x00}},
		{[]byte("poison:c"), invalidBytes},
		{[]byte("poison:c"), futureBytes},
	}
	if kcat, err := exec.LookPath("kcat"); err == nil {
		for i, r := range records {
			// kcat -P sends each file argument as one message: arbitrary bytes stay intact.
			path := filepath.Join(s.dir, fmt.Sprintf("poison-%d.bin", i))
			require.NoError(t, os.WriteFile(path, r.value, 0o644))
			out, err := exec.Command(kcat, "-P", "-b", s.brokerAddr, "-t", s.topic, "-k", string(r.key),
				"-X", "partitioner=murmur2_random", path).CombinedOutput()
			require.NoError(t, err, "kcat: %s", out)
		}
		return
	}
	t.Log("kcat not installed: producing poison with a raw franz-go client")
	for _, r := range records {
		require.NoError(t, s.kcl.ProduceSync(context.Background(), &kgo.Record{Topic: s.topic, Key: r.key, Value: r.value}).FirstErr())
	}
}

// rewindPersister stops the persister, moves its committed offsets back to
// the start of every partition, and starts it again: every record is
// delivered a second time, in order, after newer ones were already written.
func rewindPersister(t *testing.T, s *stack) {
	t.Helper()
	s.persister.stop()
	adm := kadm.NewClient(s.kcl)
	ctx := context.Background()
	starts, err := adm.ListStartOffsets(ctx, s.topic)
	require.NoError(t, err)
	offsets := kadm.Offsets{}
	starts.Each(func(o kadm.ListedOffset) {
		offsets.Add(kadm.Offset{Topic: s.topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := adm.CommitOffsets(ctx, s.group, offsets)
		if err == nil && resp.Error() == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "rewinding offsets: %v %v", err, resp.Error())
		time.Sleep(200 * time.Millisecond)
	}
	s.persister.start(t)
	s.waitReady(s.persister)
}
