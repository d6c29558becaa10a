package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Server is a Postgres cluster a test created (initdb in a temporary
// directory) and started on a free loopback port; it is stopped by its PID
// and deleted at cleanup.
type Server struct {
	Host string
	Port int
	Dir  string
	cmd  *exec.Cmd
	// bin, data and cred start the server again after Stop (Start).
	bin, data string
	cred      *syscall.Credential
}

// ServerOptions shape a test server.
type ServerOptions struct {
	// HBA is pg_hba.conf's content (default: trust everything local).
	HBA string
	// CertFile and KeyFile, when set, are copied in and ssl is turned on.
	CertFile, KeyFile string
}

// BinDir finds initdb and postgres: $PG_BIN, else the newest
// /usr/lib/postgresql/*/bin, else the PATH. "" when there is none.
func BinDir() string {
	if d := os.Getenv("PG_BIN"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

// StartServer creates and starts a Postgres cluster (superuser postgres,
// trust authentication unless opts.HBA says otherwise), skipping the test
// when initdb is not installed. As root, the cluster runs as the postgres
// user (initdb refuses root).
func StartServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	bin := BinDir()
	if bin == "" {
		t.Skip("initdb not installed (apt-get install postgresql, or set PG_BIN)")
	}
	var cred *syscall.Credential
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root and there is no postgres user to run initdb as: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: its parents are private to the test's user.
	dir, err := os.MkdirTemp("", "receipts-pgtest-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	chown := func(path string) {
		if uid >= 0 {
			require.NoError(t, os.Chown(path, uid, gid))
		}
	}
	chown(dir)
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
	}
	run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")

	conf := "listen_addresses = '127.0.0.1'\nunix_socket_directories = '" + dir + "'\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
	if opts.CertFile != "" {
		for _, f := range []struct{ src, dst string }{{opts.CertFile, "server.crt"}, {opts.KeyFile, "server.key"}} {
			b, err := os.ReadFile(f.src)
			require.NoError(t, err)
			dst := filepath.Join(data, f.dst)
			require.NoError(t, os.WriteFile(dst, b, 0o600))
			chown(dst)
		}
		conf += "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
	}
	appendFile(t, filepath.Join(data, "postgresql.conf"), conf)
	if opts.HBA != "" {
		require.NoError(t, os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(opts.HBA), 0o600))
		chown(filepath.Join(data, "pg_hba.conf"))
	}

	s := &Server{Host: "127.0.0.1", Port: freePort(t), Dir: dir, bin: bin, data: data, cred: cred}
	t.Cleanup(s.Stop)
	s.Start(t)
	return s
}

// Start starts the server again on its port and data directory after
// Stop (a no-op while it runs), and waits until it answers a query.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data, "-p", strconv.Itoa(s.Port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	_ = logf.Close() // the child holds its own descriptor
	s.cmd = cmd

	// Ready when the socket answers a query (over the Unix socket: pg_hba
	// may refuse whatever TCP connection the test is about).
	deadline := time.Now().Add(30 * time.Second)
	socketURL := fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable", s.Dir, s.Port)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, socketURL)
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return
		}
		cancel()
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "postgres.log"))
			t.Fatalf("postgres on port %d not ready: %v\n%s", s.Port, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart stops the server (fast shutdown) and starts it again on the
// same port and data directory.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.Start(t)
}

// URL is a connection URL to database db with extra query parameters
// (e.g. "sslmode=require").
func (s *Server) URL(db, query string) string {
	return fmt.Sprintf("postgres://postgres@%s:%d/%s?%s", s.Host, s.Port, db, query)
}

// Stop shuts the server down (SIGINT: fast shutdown) and waits, killing it
// after 10 s; safe to call twice.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	cmd := s.cmd
	s.cmd = nil
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func appendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, errors.Join(err, f.Close()))
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
