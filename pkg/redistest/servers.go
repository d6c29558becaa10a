package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// startTimeout bounds how long a test server may take to answer.
const startTimeout = 20 * time.Second

// Server is a redis-server process a test started; it is stopped (by its
// PID) at cleanup.
type Server struct {
	Addr string
	Dir  string
	cmd  *exec.Cmd
	// args start the server again after Stop (Start); ping is its
	// readiness client's options.
	args []string
	ping *redis.Options
}

// Stop kills the server and waits for it; safe to call twice.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP) and leaves its connections
// open: a hung server. Resume lets it go on.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGSTOP))
}

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGCONT))
}

// StartWithReplica starts a master and one replica of it, and waits until
// the replica's link is up; both stop at cleanup.
func StartWithReplica(t testing.TB) (master, replica *Server) {
	t.Helper()
	master = StartServer(t, FreePort(t), nil)
	host, port, err := net.SplitHostPort(master.Addr)
	require.NoError(t, err)
	replica = StartServer(t, FreePort(t), nil, "--replicaof", host, port)
	// Synced once the master counts the replica online (what ROLE and
	// WAIT count), not only once the replica's link is up.
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer rdb.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		info, _ := rdb.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			return master, replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica on %s did not sync with %s within %s:\n%s", replica.Addr, master.Addr, startTimeout, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NeedBinaries skips the test when a binary is missing.
func NeedBinaries(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s not installed (apt-get install redis-server): %v", n, err)
		}
	}
}

// handedOut are the ports FreePort returned (and their bus ports): the
// kernel may offer a port again once its probe closed, before the server
// it was meant for binds it, and parallel tests would then share it.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback TCP port that is free, and whose port+10000
// (Redis Cluster's bus port) is free too, neither returned before.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port+10000 > 65535 || handedOut.ports[port] || handedOut.ports[port+10000] {
			continue
		}
		if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			_ = bus.Close()
			handedOut.ports[port], handedOut.ports[port+10000] = true, true
			return port
		}
	}
	t.Fatal("no free port pair for a Redis server")
	return 0
}

// StartServer starts redis-server in a new temporary directory with the
// given extra arguments (no persistence, loopback only), waits until ping
// answers (with pingOpt's TLS config for a TLS-only server), and stops it
// at cleanup.
func StartServer(t testing.TB, port int, pingOpt *redis.Options, args ...string) *Server {
	t.Helper()
	return startServer(t, port, "", pingOpt, args...)
}

// StartSentinel starts a sentinel on port watching the master named name at
// masterAddr (quorum 1), and stops it at cleanup.
func StartSentinel(t testing.TB, port int, name, masterAddr string) *Server {
	t.Helper()
	host, p, err := net.SplitHostPort(masterAddr)
	require.NoError(t, err)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, "sentinel monitor %s %s %s 1\n", name, host, p), 0o600))
	return startServer(t, port, conf, nil, "--sentinel")
}

func startServer(t testing.TB, port int, conf string, pingOpt *redis.Options, args ...string) *Server {
	t.Helper()
	NeedBinaries(t, "redis-server")
	dir := t.TempDir()
	var full []string
	if conf != "" {
		full = append(full, conf)
	}
	full = append(full, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--logfile", filepath.Join(dir, "redis.log"))
	full = append(full, args...)
	if !strings.Contains(strings.Join(args, " "), "--port ") {
		full = append(full, "--port", strconv.Itoa(port))
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir, args: full, ping: pingOpt}
	t.Cleanup(s.Stop)
	s.Start(t)
	return s
}

// Start starts the server again after Stop (a no-op while it runs), on the
// same port and directory, empty (there is no persistence), and waits
// until ping answers.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command("redis-server", s.args...)
	require.NoError(t, cmd.Start(), "starting redis-server")
	s.cmd = cmd

	opt := &redis.Options{}
	if s.ping != nil {
		*opt = *s.ping
	}
	opt.Addr, opt.DialerRetries, opt.MaxRetries = s.Addr, 1, -1
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	deadline := time.Now().Add(startTimeout)
	// Wait for the port first: go-redis would log every refused dial.
	for {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			_ = conn.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			t.Fatalf("redis-server on %s did not listen within %s: %v\n%s", s.Addr, startTimeout, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			t.Fatalf("redis-server on %s did not answer within %s: %v\n%s", s.Addr, startTimeout, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Cluster is a local Redis Cluster of masters only.
type Cluster struct {
	Addrs   []string
	Servers []*Server
}

// StartCluster starts n masters (cluster-enabled redis-servers), joins them
// with redis-cli --cluster create (slots spread evenly, no replicas), waits
// until every node reports cluster_state:ok, and stops them at cleanup.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return startCluster(t, n, 0, "", nil)
}

// StartReplicatedCluster starts masters masters with replicas replicas
// each (redis-cli assigns them), so that a master's death promotes one of
// its replicas (failover after the 5 s node timeout).
func StartReplicatedCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	return startCluster(t, masters*(1+replicas), replicas, "", nil)
}

// StartTLSCluster is StartCluster with nodes that listen only on TLS ports
// (tlsArgs: the certificate options, tls-cluster), checked with the CA in
// caFile.
func StartTLSCluster(t testing.TB, n int, caFile string, tlsArgs []string) *Cluster {
	t.Helper()
	return startCluster(t, n, 0, caFile, tlsArgs)
}

func startCluster(t testing.TB, n, replicas int, caFile string, tlsArgs []string) *Cluster {
	t.Helper()
	NeedBinaries(t, "redis-server", "redis-cli")
	var opt *redis.Options
	var cliTLS []string
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(pem))
		opt = &redis.Options{TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
		cliTLS = []string{"--tls", "--cacert", caFile}
	}
	c := &Cluster{}
	for range n {
		port := FreePort(t)
		args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"}
		if caFile != "" {
			args = append(append(args, "--port", "0", "--tls-port", strconv.Itoa(port),
				"--cluster-port", strconv.Itoa(port+10000)), tlsArgs...)
		}
		s := StartServer(t, port, opt, args...)
		c.Servers = append(c.Servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cliArgs := append(append(append(cliTLS, "--cluster", "create"), c.Addrs...), "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.CommandContext(ctx, "redis-cli", cliArgs...).CombinedOutput()
	require.NoError(t, err, "redis-cli --cluster create: %s", out)
	for _, a := range c.Addrs {
		o := &redis.Options{}
		if opt != nil {
			*o = *opt
		}
		o.Addr = a
		rdb := redis.NewClient(o)
		for {
			info, err := rdb.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("cluster node %s not ok: %v %s", a, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = rdb.Close()
	}
	if replicas > 0 {
		waitReplicasSynced(ctx, t, c, opt, n/(1+replicas)*replicas)
	}
	return c
}

// waitReplicasSynced waits until want nodes are replicas whose link to
// their master is up (a replica still syncing cannot be promoted).
func waitReplicasSynced(ctx context.Context, t testing.TB, c *Cluster, opt *redis.Options, want int) {
	t.Helper()
	for {
		synced := 0
		for _, a := range c.Addrs {
			o := &redis.Options{}
			if opt != nil {
				*o = *opt
			}
			o.Addr = a
			rdb := redis.NewClient(o)
			info, err := rdb.Info(ctx, "replication").Result()
			_ = rdb.Close()
			if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
				synced++
			}
		}
		if synced >= want {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d cluster replicas synced", synced, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
