package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// binDir holds the binaries built once by TestMain.
var binDir string

// raceEnv, set to 1, builds the binaries with the race detector (make
// test-race); a test whose binary reports a race then fails.
const raceEnv = "RECEIPTS_E2E_RACE"

// raceExitCode is the status a binary built with -race exits with when it
// reported a race and would otherwise have exited 0 (GORACE's exitcode).
const raceExitCode = 66

// raceWarning starts each report of the race detector.
const raceWarning = "WARNING: DATA RACE"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "receipts-e2e-bin-")
	if err != nil {
		panic(err)
	}
	build := []string{"build", "-o", dir + "/"}
	if v := os.Getenv(raceEnv); v != "" && v != "0" {
		build = append(build, "-race")
		fmt.Println("e2e: binaries built with -race")
	}
	build = append(build, "./cmd/devbroker", "./cmd/kafkagate", "./cmd/persister", "./cmd/dlt-reconciler", "./cmd/receiptsctl")
	cmd := exec.Command("go", build...)
	cmd.Dir = ".."
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building binaries:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a free loopback port that no earlier call (here or
// in redistest, whose servers share the process) returned.
func freePort(t testing.TB) int {
	t.Helper()
	return redistest.FreePort(t)
}

// proc is one running binary whose output goes to a log file.
type proc struct {
	name string
	// path is the executable; empty means name in binDir.
	path string
	args []string
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	// raced is set when a run of the binary exited with raceExitCode.
	raced atomic.Bool
}

func (p *proc) start(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	fmt.Fprintf(f, "\n=== start %s %s at %s\n", p.name, strings.Join(p.args, " "), time.Now().Format(time.RFC3339Nano))
	path := p.path
	if path == "" {
		path = filepath.Join(binDir, p.name)
	}
	cmd := exec.Command(path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	p.cmd = cmd
	p.done = make(chan struct{})
	done := p.done
	go func() {
		if err := cmd.Wait(); cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == raceExitCode {
			p.raced.Store(true)
			fmt.Fprintf(f, "\n=== %s exited with status %d: %v\n", p.name, raceExitCode, err)
		}
		f.Close()
		close(done)
	}()
}

// raceReport returns what the race detector said about any run of the
// binary (its first report, or its exit status), or "" when it said
// nothing.
func (p *proc) raceReport() string {
	b, _ := os.ReadFile(p.log)
	// The detector writes the warning on a line of its own; the command
	// line the log starts with does not count.
	if i := strings.Index(string(b), "\n"+raceWarning+"\n"); i >= 0 {
		lines := strings.SplitN(string(b[i+1:]), "\n", 61)
		return strings.Join(lines[:min(len(lines), 60)], "\n")
	}
	if p.raced.Load() {
		return fmt.Sprintf("exit status %d (the race detector found a race)", raceExitCode)
	}
	return ""
}

// failOnRace fails t when a binary of the test reported a data race.
func failOnRace(t testing.TB, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		if r := p.raceReport(); r != "" {
			t.Errorf("%s: data race:\n%s", p.name, r)
		}
	}
}

// kill9 kills the process at once, as a crash would.
func (p *proc) kill9() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to drain and exit (SIGTERM), killing it after 20s.
func (p *proc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.kill9()
	}
}

func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stack is the whole pipeline of one test: a dev broker, the three services,
// a Postgres schema and a Redis prefix of its own.
type stack struct {
	t        testing.TB
	dir      string
	schema   *pgtest.Schema
	store    *pgstore.Store
	rdb      *redis.Client
	rstore   *redisstore.Store
	prefix   string
	topic    string
	dltTopic string
	group    string

	brokerAddr string
	apiAddr    string
	admin      map[string]string

	broker, gate, persister, reconciler *proc
	kcl                                 *kgo.Client

	// pgServer and redisServer are the stack's own servers (stackOptions
	// ownServers), nil on the machine's shared ones.
	pgServer    *pgtest.Server
	redisServer *redistest.Server
}

// stackOptions tune a stack.
type stackOptions struct {
	// spool enables the gateway's local spool (directory in the test dir).
	spool bool
	// extraGateArgs are appended to kafkagate's arguments.
	extraGateArgs []string
	// extraPersisterArgs are appended to the persister's arguments.
	extraPersisterArgs []string
	// extraReconcilerArgs are appended to the reconciler's arguments.
	extraReconcilerArgs []string
	// ownServers runs the stack against a Postgres and a Redis server it
	// starts for itself (own ports and data directories), which a test may
	// stop and restart without touching the machine's shared services.
	ownServers bool
	// noSweep turns the reconciler's drift sweep off: what reaches
	// Postgres then came down the durable path alone.
	noSweep bool
	// redisCluster, when set, is the Redis Cluster the services and the
	// checks use instead of the machine's Redis (stack.rdb is then nil).
	// Not with ownServers.
	redisCluster *redistest.Cluster
}

func newStack(t testing.TB, opts stackOptions) *stack {
	t.Helper()
	s := &stack{t: t, dir: t.TempDir(), admin: map[string]string{}}
	require.False(t, opts.ownServers && opts.redisCluster != nil, "ownServers and redisCluster do not go together")
	redisURL := redistest.URL()
	if opts.ownServers {
		// A check that cannot run fails: it never skips itself.
		require.NotEmpty(t, pgtest.BinDir(), "initdb is not installed: the stack needs a Postgres server of its own (scripts/services.sh)")
		s.pgServer = pgtest.StartServer(t, pgtest.ServerOptions{})
		s.schema = pgtest.NewSchemaAt(t, s.pgServer.URL("postgres", "sslmode=disable"))
		s.redisServer = redistest.StartServer(t, redistest.FreePort(t), nil)
		redisURL = "redis://" + s.redisServer.Addr + "/0"
		opt, err := redis.ParseURL(redisURL)
		require.NoError(t, err)
		s.rdb = redis.NewClient(opt)
		t.Cleanup(func() { _ = s.rdb.Close() })
	} else {
		s.schema = pgtest.NewSchema(t)
	}
	s.store = s.schema.Store
	redisArgs := []string{"--redis-url", redisURL}
	if c := opts.redisCluster; c != nil {
		// A cluster of the test's own: no other test shares it.
		s.prefix = "e2e:"
		crdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, ClusterStateReloadInterval: redisstore.ClusterStateReloadInterval})
		t.Cleanup(func() { _ = crdb.Close() })
		s.rstore = redisstore.New(crdb, redisstore.Config{Prefix: s.prefix})
		redisArgs = []string{"--redis-mode", "cluster", "--redis-addrs", strings.Join(c.Addrs, ","), "--redis-url", "redis://" + c.Addrs[0]}
	} else {
		if s.rdb == nil {
			s.rdb = redistest.Client(t)
		}
		s.prefix = redistest.Prefix(t, s.rdb)
		s.rstore = redisstore.New(s.rdb, redisstore.Config{Prefix: s.prefix})
	}
	redisArgs = append(redisArgs, "--redis-prefix", s.prefix)
	sfx := kafkatest.Suffix()
	s.topic, s.dltTopic, s.group = "read-receipts-"+sfx, "read-receipts-dlt-"+sfx, "persister-"+sfx

	brokerPort := freePort(t)
	s.brokerAddr = "127.0.0.1:" + strconv.Itoa(brokerPort)
	s.apiAddr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	for _, n := range []string{"kafkagate", "persister", "dlt-reconciler"} {
		s.admin[n] = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	log := func(n string) string { return filepath.Join(s.dir, n+".log") }
	s.broker = &proc{name: "devbroker", log: log("devbroker"), args: []string{
		"--listen-port", strconv.Itoa(brokerPort), "--data-dir", filepath.Join(s.dir, "kafka"),
		"--topic", s.topic, "--partitions", "8", "--dlt-topic", s.dltTopic, "--dlt-partitions", "2"}}
	common := []string{"--brokers", s.brokerAddr, "--pg-url", s.schema.URL, "--log-format", "json"}
	gateArgs := append([]string{"--listen", s.apiAddr, "--admin-addr", s.admin["kafkagate"], "--topic", s.topic, "--persister-group", s.group}, common...)
	gateArgs = append(append(append(gateArgs, redisArgs...), authArgs(t, s.dir)...), opts.extraGateArgs...)
	spoolDir := ""
	if opts.spool {
		spoolDir = filepath.Join(s.dir, "spool")
	}
	// Always explicit: the binary's dev default is relative to the working
	// directory. An empty directory disables the spool.
	gateArgs = append(gateArgs, "--spool-dir", spoolDir)
	s.gate = &proc{name: "kafkagate", log: log("kafkagate"), args: gateArgs}
	s.persister = &proc{name: "persister", log: log("persister"), args: append([]string{
		"--admin-addr", s.admin["persister"], "--group", s.group, "--topic", s.topic, "--dlt-topic", s.dltTopic, "--session-timeout", "6s"},
		append(common, opts.extraPersisterArgs...)...)}
	// The sweep runs every 2s here (1m by default) so that repairs after a
	// Redis loss show up within a test's patience. Its grace stays the
	// default (30s): a write the persister has not reached yet is in
	// flight, not drift, and a loaded run's persister can be seconds
	// behind (Redis-side repairs do not wait for it).
	reconcilerArgs := []string{"--admin-addr", s.admin["dlt-reconciler"], "--group", "reconciler-" + sfx, "--dlt-topic", s.dltTopic,
		"--sweep-interval", "2s", "--session-timeout", "6s"}
	if opts.noSweep {
		reconcilerArgs = append(reconcilerArgs, "--sweep=false")
	}
	s.reconciler = &proc{name: "dlt-reconciler", log: log("dlt-reconciler"),
		args: append(append(append(reconcilerArgs, common...), redisArgs...), opts.extraReconcilerArgs...)}
	t.Cleanup(func() {
		for _, p := range []*proc{s.gate, s.persister, s.reconciler, s.broker} {
			p.stop()
		}
		failOnRace(t, s.broker, s.gate, s.persister, s.reconciler)
		if t.Failed() {
			for _, p := range []*proc{s.broker, s.gate, s.persister, s.reconciler} {
				t.Logf("--- %s log tail:\n%s", p.name, p.tail(40))
			}
		}
	})

	s.broker.start(t)
	s.waitBroker()
	kcl, err := kgo.NewClient(kafkatest.FastClientOpts([]string{s.brokerAddr})...)
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	s.kcl = kcl
	for _, p := range []*proc{s.persister, s.gate, s.reconciler} {
		p.start(t)
	}
	for _, p := range []*proc{s.persister, s.gate, s.reconciler} {
		s.waitReady(p)
	}
	return s
}

func (s *stack) waitBroker() {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", s.brokerAddr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		if !s.broker.running() {
			s.t.Fatalf("devbroker exited:\n%s", s.broker.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("devbroker not listening on %s:\n%s", s.brokerAddr, s.broker.tail(30))
}

// waitReady polls the service's /readyz until it answers 200.
func (s *stack) waitReady(p *proc) {
	s.t.Helper()
	addr := s.admin[p.name]
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			b := make([]byte, 512)
			n, _ := resp.Body.Read(b)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			last = string(b[:n])
		} else {
			last = err.Error()
		}
		if !p.running() {
			s.t.Fatalf("%s exited:\n%s", p.name, p.tail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("%s not ready after 60s (%s):\n%s", p.name, last, p.tail(40))
}

// lag returns how far the persister group's committed offsets are behind
// the end of the topic, over all partitions.
func (s *stack) lag(ctx context.Context) (int64, error) {
	l, err := grouplag.ConsumerLag(ctx, kadm.NewClient(s.kcl), s.group, s.topic)
	return l.Total, err
}

// model is what callers were told: the greatest acknowledged cursors per key.
type model struct {
	mu    sync.Mutex
	acked map[receipt.Key]receipt.State
	n     int
}

func newModel() *model { return &model{acked: map[receipt.Key]receipt.State{}} }

func (m *model) ack(st receipt.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	cur := m.acked[st.Key]
	cur.Key = st.Key
	merged, _ := receipt.Merge(cur, st)
	m.acked[st.Key] = merged
}

func (m *model) snapshot() map[receipt.Key]receipt.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[receipt.Key]receipt.State, len(m.acked))
	for k, v := range m.acked {
		out[k] = v
	}
	return out
}

// verdict is the invariant check of one quiet system.
type verdict struct {
	keys, lost, diverged int
	firstProblem         string
}

// check compares Postgres and Redis with the model for every key.
func (s *stack) check(ctx context.Context, acked map[receipt.Key]receipt.State) (verdict, error) {
	v := verdict{keys: len(acked)}
	byUser := map[string][]receipt.Key{}
	for k := range acked {
		byUser[k.User] = append(byUser[k.User], k)
	}
	for user, keys := range byUser {
		pgRows, err := cursors.NewPostgres(s.store).Get(ctx, user, nil)
		if err != nil {
			return v, err
		}
		pg := map[string]receipt.State{}
		for _, r := range pgRows {
			pg[r.Key.Channel] = r
		}
		chans := make([]string, len(keys))
		for i, k := range keys {
			chans[i] = k.Channel
		}
		rRows, _, err := cursors.NewStore(s.rstore).Get(ctx, user, chans)
		if err != nil {
			return v, err
		}
		rd := map[string]receipt.State{}
		for _, r := range rRows {
			rd[r.Key.Channel] = r
		}
		for _, k := range keys {
			want := acked[k]
			p, r := pg[k.Channel], rd[k.Channel]
			switch {
			case !p.Covers(want) || !r.Covers(want):
				v.lost++
				if v.firstProblem == "" {
					v.firstProblem = fmt.Sprintf("%s: acked %+v/%+v, postgres %+v/%+v, redis %+v/%+v", k.KafkaKey(),
						want.Read.Position, want.Delivered.Position, p.Read.Position, p.Delivered.Position, r.Read.Position, r.Delivered.Position)
				}
			case !p.SameCursors(r):
				v.diverged++
				if v.firstProblem == "" {
					v.firstProblem = fmt.Sprintf("%s: postgres %+v/%+v != redis %+v/%+v", k.KafkaKey(),
						p.Read.Position, p.Delivered.Position, r.Read.Position, r.Delivered.Position)
				}
			}
		}
	}
	// Every kind of state, not only the cursors the model acknowledged:
	// a sweep that repairs nothing finds no key where the stores differ.
	sw, err := drift.New(drift.Config{Postgres: s.store, Redis: s.rstore, Grace: -1, DryRun: true,
		PagesPerSecond: 1e6, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return v, err
	}
	rep, err := sw.SweepOnce(ctx)
	if err != nil {
		return v, err
	}
	if n := rep.Found.Total(); n > 0 {
		v.diverged += n
		if v.firstProblem == "" {
			v.firstProblem = fmt.Sprintf("the stores differ in %d keys: %s; first: %+v", n, byKind(rep), rep.Samples)
		}
	}
	return v, nil
}

// byKind formats a sweep's findings per kind of state.
func byKind(rep drift.Report) string {
	var parts []string
	for kind, c := range rep.ByKind {
		if c.Total() > 0 {
			parts = append(parts, fmt.Sprintf("%s %+v", kind, *c))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// waitConverged waits until the persister has no lag and every key holds at
// least its acknowledged value in both stores, with both stores agreeing.
// It returns the time it took and the last verdict.
func (s *stack) waitConverged(ctx context.Context, acked map[receipt.Key]receipt.State, within time.Duration) (time.Duration, verdict) {
	s.t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	var v verdict
	var err error
	for {
		var lag int64
		lag, err = s.lag(ctx)
		if err == nil && lag == 0 {
			v, err = s.check(ctx, acked)
			if err == nil && v.lost == 0 && v.diverged == 0 {
				return time.Since(start), v
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil && v.firstProblem == "" {
		v.firstProblem = err.Error()
	}
	return time.Since(start), v
}

// newAPIClient is a client of the API at addr: gRPC over h2c, else
// Connect with JSON over HTTP/1.1, as the model tests' clients alternate.
func newAPIClient(addr string, grpc bool) receiptsv1connect.ReceiptServiceClient {
	hc := &http.Client{Timeout: 15 * time.Second}
	if grpc {
		hc.Transport = h2cTransport()
		return receiptsv1connect.NewReceiptServiceClient(hc, "http://"+addr, connect.WithGRPC())
	}
	return receiptsv1connect.NewReceiptServiceClient(hc, "http://"+addr, connect.WithProtoJSON())
}
