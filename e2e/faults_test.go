package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
)

// The fault suite stops and restarts the machine's Postgres and Redis, so it
// never runs beside other tests: it runs only when RECEIPTS_FAULTS is set
// ("short" for the CI subset, "full" for every scenario; see docs/faults.md).
func faultMode(t *testing.T) string {
	mode := os.Getenv("RECEIPTS_FAULTS")
	if mode == "" {
		t.Skip("fault suite: set RECEIPTS_FAULTS=short or full (make faults / make faults-short)")
	}
	return mode
}

// scenario is one injected fault.
type scenario struct {
	name string
	// short scenarios run in CI; the others only in the full suite.
	short bool
	// poison is how many records the scenario itself dead-letters on purpose.
	poison int
	// inject runs while the load is running.
	inject func(t *testing.T, s *stack)
	// redisLoss: Redis loses its data in this scenario, so the sampler's
	// memory of Redis values is reset at injection time.
	redisLoss bool
}

// result is one row of the table.
type result struct {
	name              string
	acked             int
	lost, regressed   int
	converge          time.Duration
	deadLetters       int64
	spooled, callErrs int64
	// notices acknowledged, and (user, channel) counts that did not match
	// the notice model once quiet.
	notices, countMismatches int
}

func TestFaults(t *testing.T) {
	mode := faultMode(t)
	scenarios := []scenario{
		{name: "kill -9 persister mid-batch, restart", short: true, inject: func(t *testing.T, s *stack) {
			s.persister.kill9()
			s.persister.start(t)
			s.waitReady(s.persister)
		}},
		{name: "kill -9 kafkagate mid-load, restart", short: true, inject: func(t *testing.T, s *stack) {
			s.gate.kill9()
			s.gate.start(t)
			s.waitReady(s.gate)
		}},
		{name: "restart Postgres", inject: func(t *testing.T, s *stack) {
			run(t, "pg_ctlcluster", "--skip-systemctl-redirect", pgVersion(t), "main", "restart", "-m", "fast")
		}},
		{name: "stop Postgres 30s, start", inject: func(t *testing.T, s *stack) {
			run(t, "pg_ctlcluster", "--skip-systemctl-redirect", pgVersion(t), "main", "stop", "-m", "fast")
			time.Sleep(30 * time.Second) // the fault's duration
			run(t, "pg_ctlcluster", "--skip-systemctl-redirect", pgVersion(t), "main", "start")
		}},
		{name: "FLUSHALL Redis", redisLoss: true, inject: func(t *testing.T, s *stack) {
			require.NoError(t, s.rdb.FlushAll(context.Background()).Err())
		}},
		{name: "stop Redis 20s, start", redisLoss: true, inject: func(t *testing.T, s *stack) {
			_ = exec.Command("redis-cli", "shutdown", "nosave").Run()
			time.Sleep(20 * time.Second) // the fault's duration
			startRedis(t)
		}},
		{name: "stop Kafka broker 20s, restart on its data dir", short: true, inject: func(t *testing.T, s *stack) {
			s.broker.kill9()
			time.Sleep(20 * time.Second) // the fault's duration
			s.broker.start(t)
			s.waitBroker()
		}},
		{name: "poison records from a foreign client", short: true, poison: 3, inject: func(t *testing.T, s *stack) {
			producePoison(t, s)
		}},
		{name: "re-deliver the topic from an old offset", short: true, inject: func(t *testing.T, s *stack) {
			rewindPersister(t, s)
		}},
	}
	var results []result
	for _, sc := range scenarios {
		if mode != "full" && !sc.short {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			r := runScenario(t, sc)
			results = append(results, r)
			require.Zero(t, r.lost, "lost acknowledged writes")
			require.Zero(t, r.regressed, "regressions")
			require.Zero(t, r.countMismatches, "unread and mention counts differ from the notice model")
			require.EqualValues(t, sc.poison, r.deadLetters, "dead letters: an outage must not dead-letter good records")
		})
	}
	table := formatTable(results)
	t.Log("\n" + table)
	if out := os.Getenv("RECEIPTS_FAULTS_TABLE"); out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		fmt.Fprintf(f, "\nRun at %s (mode %s):\n\n%s", time.Now().UTC().Format(time.RFC3339), mode, table)
		f.Close()
	}
}

func runScenario(t *testing.T, sc scenario) result {
	s := newStack(t, stackOptions{spool: true})
	m := newModel()
	d := startDriver(s.apiAddr, workload{clients: 4, users: 60, channels: 10, batch: 25, dup: 0.2, reorder: 0.15}, m, uint64(time.Now().UnixNano()))
	smp := startSampler(s, m)
	nt := startNoticer(s.apiAddr, 6, 20, 2, uint64(time.Now().UnixNano()))
	waitAcked(t, m, 2000, 60*time.Second)
	before := m.n
	if sc.redisLoss {
		smp.resetRedis()
	}
	sc.inject(t, s)
	if sc.redisLoss {
		smp.resetRedis()
	}
	// Keep the load on until the system has acknowledged more after the fault.
	waitAcked(t, m, before+2000, 120*time.Second)
	d.halt()
	nt.halt()
	acked := m.snapshot()
	took, v := s.waitConverged(context.Background(), acked, 180*time.Second)
	smp.halt()
	if v.lost > 0 || v.diverged > 0 {
		t.Logf("first problem: %s", v.firstProblem)
	}
	// Once quiet, the counts (from Redis, rebuilt from Postgres where
	// Redis lost them) match the notice model.
	mismatches, deadline := -1, time.Now().Add(60*time.Second)
	var first []string
	for {
		n, f, err := nt.check(context.Background())
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
	return result{
		name: sc.name, acked: m.n, lost: v.lost + v.diverged, regressed: int(smp.regressed.Load()),
		converge: took, deadLetters: s.deadLetters(), spooled: d.spooled.Load(), callErrs: d.errs.Load(),
		notices: int(nt.acked.Load()), countMismatches: mismatches,
	}
}

func formatTable(rs []result) string {
	var b strings.Builder
	b.WriteString("| scenario | events acknowledged | lost | regressed | seconds to converge | dead letters | spooled | failed calls | notices acknowledged | count mismatches |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f | %d | %d | %d | %d | %d |\n", r.name, r.acked, r.lost, r.regressed,
			r.converge.Seconds(), r.deadLetters, r.spooled, r.callErrs, r.notices, r.countMismatches)
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
			pg, perr := smp.s.store.Get(qctx, u, nil)
			rd, _, rerr := smp.s.rstore.Get(qctx, u, nil)
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

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
}

func pgVersion(t *testing.T) string {
	entries, err := os.ReadDir("/etc/postgresql")
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	return entries[0].Name()
}

// startRedis starts Redis as the machine starts it (no persistence), and
// waits until it answers.
func startRedis(t *testing.T) {
	t.Helper()
	_ = os.MkdirAll("/var/lib/redis", 0o755)
	_ = os.MkdirAll("/var/log/redis", 0o755)
	run(t, "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379", "--save", "",
		"--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if exec.Command("redis-cli", "ping").Run() == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("redis did not come back")
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
