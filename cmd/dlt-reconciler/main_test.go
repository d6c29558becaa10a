package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/cmd/internal/cli"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

const waitFor = 30 * time.Second

func TestHelpListsEveryFlagWithEnvAndDefault(t *testing.T) {
	t.Parallel()
	for _, migrateOnly := range []bool{false, true} {
		var out bytes.Buffer
		args := []string{"--help"}
		if migrateOnly {
			args = []string{"migrate", "--help"}
		}
		require.ErrorIs(t, run(context.Background(), args, &out), flag.ErrHelp)
		help := out.String()
		c := newConfig()
		c.svc.MigrateOnly = migrateOnly
		fs := c.svc.FlagSet(io.Discard, c.registerFlags)
		n := 0
		fs.VisitAll(func(f *flag.Flag) {
			n++
			require.Contains(t, help, "--"+f.Name)
			require.Contains(t, help, "(env "+cli.EnvName(f.Name)+")")
		})
		require.Equal(t, n, strings.Count(help, "(default "), help)
		if migrateOnly {
			require.Contains(t, help, "dlt-reconciler migrate [flags]")
			require.NotContains(t, help, "--sweep", "the migrate subcommand has only the Postgres and log flags")
			continue
		}
		for _, flagName := range []string{"brokers", "session-timeout", "redis-url", "redis-prefix", "dlt-topic", "group",
			"max-poll-records", "retry-max-duration", "attempt-timeout", "sweep", "sweep-interval", "sweep-page-size",
			"sweep-pages-per-second", "sweep-scan-count", "sweep-grace", "admin-addr", "migrate", "pg-url"} {
			require.NotNil(t, fs.Lookup(flagName), flagName)
		}
		for _, want := range []string{`"127.0.0.1:9102"`, `"receipts-dlt-reconciler"`, `"read-receipts-dlt"`, `"127.0.0.1:9092"`,
			`"redis://127.0.0.1:6379/0"`, `"receipts:"`, `"20"`, `"30s"`, `"5s"`, `"true"`, `"1m0s"`, `"500"`, `"1000"`} {
			require.Contains(t, help, "(default "+want+")")
		}
	}
}

func TestUnexpectedArgumentsFail(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, run(context.Background(), []string{"reconcile-please"}, io.Discard), "unexpected arguments")
}

// newEmptySchema creates a schema with no tables in the test database and
// returns a URL whose search_path is that schema.
func newEmptySchema(t *testing.T) (name, pgURL string, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	pgtest.NewSchema(t) // makes sure the test database exists
	conn, err := pgx.Connect(ctx, pgtest.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	name = "t_dltcmd_" + kafkatest.Suffix()
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE") })
	return name, withQuery(t, pgtest.URL(), "search_path", name), conn
}

// withQuery returns rawURL with one query parameter set.
func withQuery(t *testing.T, rawURL, key, value string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestMigrateSubcommandCreatesTheTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, pgURL, conn := newEmptySchema(t)
	args := []string{"migrate", "--pg-url", pgURL, "--log-level", "warn"}
	require.NoError(t, run(ctx, args, io.Discard))

	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = $1 AND table_name IN ('read_receipts', 'parked_dead_letters', 'schema_version')`, schema).Scan(&n))
	require.Equal(t, 3, n)
	// Twice is fine.
	require.NoError(t, run(ctx, args, io.Discard))
}

// closedAddr returns a local address nothing listens on.
func closedAddr(t *testing.T) string { t.Helper(); return freeAddr(t) }

// While Postgres cannot be reached, migrate waits (a pod may start before
// its database) until its context ends; a server that answers with an
// error (a missing database) fails it at once.
func TestMigrateWaitsForPostgresButNotForAnError(t *testing.T) {
	t.Parallel()
	// Postgres is down: still waiting when the context ends.
	down := "postgres://postgres@" + closedAddr(t) + "/receipts_test?sslmode=disable&connect_timeout=2"
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err := run(ctx, []string{"migrate", "--pg-url", down, "--log-level", "error"}, io.Discard)
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded, "it waited for Postgres until the context ended: %v", err)
	require.NotContains(t, err.Error(), "connection refused", "a refused connection is waited out, not returned")

	// The server answers that the database does not exist: no waiting.
	missing, err := url.Parse(pgtest.URL())
	require.NoError(t, err)
	missing.Path = "/receipts_no_such_db_" + kafkatest.Suffix()
	ctx, cancel = context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err = run(ctx, []string{"migrate", "--pg-url", missing.String(), "--log-level", "error"}, io.Discard)
	require.ErrorContains(t, err, "does not exist")
	require.NoError(t, ctx.Err(), "a missing database fails at once, it is not waited for")
}

// service is a dlt-reconciler run by a test.
type service struct {
	admin  string
	cancel context.CancelFunc
	done   chan error
}

func startService(t *testing.T, args ...string) *service {
	t.Helper()
	s := &service{admin: freeAddr(t), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	args = append([]string{"--admin-addr", s.admin, "--log-level", "warn"}, args...)
	go func() { s.done <- run(ctx, args, io.Discard) }()
	t.Cleanup(func() { _ = s.stop(t) })
	return s
}

// stop cancels the run and returns its error; the run must end within
// waitFor.
func (s *service) stop(t *testing.T) error {
	t.Helper()
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		return err
	case <-time.After(waitFor):
		t.Fatal("dlt-reconciler did not stop after its context ended")
		return nil
	}
}

// readyz returns the status and body of /readyz ("" and 0 while the admin
// port does not answer).
func (s *service) readyz(t *testing.T) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + s.admin + "/readyz")
	if err != nil {
		return 0, ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *service) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + s.admin + "/metrics")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func rstate(user, ch string, read, delivered int64) receipt.State {
	s := receipt.State{Key: receipt.Key{User: user, Channel: ch}, DeviceID: "dev", UpdatedAtUnixMs: 1000}
	if read > 0 {
		s.Read = receipt.Cursor{Position: receipt.Position{Seq: read}, MessageID: "r" + strings.Repeat("x", int(read%3))}
	}
	s.Delivered = receipt.Cursor{Position: receipt.Position{Seq: max(read, delivered)}, MessageID: "d"}
	return s
}

// The service against kfake, a test schema and a Redis prefix: it migrates,
// becomes ready, repairs a dead letter into Postgres and Redis by the max
// rule, and stops cleanly when its context ends.
func TestServiceRepairsADeadLetterAndStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	broker := kafkatest.New(t)
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: prefix})
	_, pgURL, _ := newEmptySchema(t) // the service migrates it (--migrate defaults to true)

	// Redis is ahead on read; the dead letter is ahead on delivered.
	k := receipt.Key{User: "alice", Channel: "general"}
	_, err := cursors.NewStore(rs).Merge(ctx, []receipt.State{rstate(k.User, k.Channel, 6, 6)})
	require.NoError(t, err)

	s := startService(t,
		"--brokers", strings.Join(broker.Seeds, ","), "--dlt-topic", broker.DLTTopic, "--group", "reconciler-"+kafkatest.Suffix(),
		"--pg-url", pgURL, "--redis-url", redistest.URL(), "--redis-prefix", prefix,
		"--session-timeout", "6s", "--sweep-interval", "200ms")
	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = s.readyz(t)
		return code == http.StatusOK
	}, waitFor, 20*time.Millisecond, "never ready: %q", &body)

	rec, err := event.Encode(rstate(k.User, k.Channel, 4, 9))
	require.NoError(t, err)
	rec.Topic = broker.Topic
	dl := event.DeadLetter(rec, broker.DLTTopic, "rejected by postgres: test")
	cl := broker.Client(t)
	require.NoError(t, cl.ProduceSync(ctx, dl).FirstErr())

	pg, err := pgx.Connect(ctx, pgURL)
	require.NoError(t, err)
	defer func() { _ = pg.Close(ctx) }()
	var read, delivered int64
	require.Eventually(t, func() bool {
		err := pg.QueryRow(ctx, `SELECT read_seq, delivered_seq FROM read_receipts WHERE user_id = $1 AND channel_id = $2`,
			k.User, k.Channel).Scan(&read, &delivered)
		return err == nil && read == 6 && delivered == 9
	}, waitFor, 20*time.Millisecond, "postgres never held the merge of Redis and the dead letter (read %d, delivered %d)", &read, &delivered)
	require.Eventually(t, func() bool {
		sts, _, err := cursors.NewStore(rs).Get(ctx, k.User, []string{k.Channel})
		return err == nil && len(sts) == 1 && sts[0].Read.Position.Seq == 6 && sts[0].Delivered.Position.Seq == 9
	}, waitFor, 20*time.Millisecond, "redis never took the dead letter's delivered cursor")
	require.Eventually(t, func() bool {
		return strings.Contains(s.metrics(t), "receipts_reconciler_reconciled_total 1")
	}, waitFor, 20*time.Millisecond)
	bi := cli.Build()
	require.Contains(t, s.metrics(t), fmt.Sprintf("receipts_build_info{goversion=%q,revision=%q,version=%q} 1", bi.GoVersion, bi.Revision, bi.Version))
	require.Eventually(t, func() bool {
		m := s.metrics(t)
		return strings.Contains(m, `receipts_reconciler_sweeps_total{result="ok"} `) &&
			!strings.Contains(m, `receipts_reconciler_sweeps_total{result="ok"} 0`)
	}, waitFor, 20*time.Millisecond, "the drift sweep runs beside the consumer")

	stopped := make(chan error, 1)
	go func() { stopped <- s.stop(t) }()
	select {
	case err := <-stopped:
		require.NoError(t, err, "a stop by the context is clean")
	case <-time.After(waitFor):
		t.Fatal("the service did not stop")
	}
	code, _ := s.readyz(t)
	require.Zero(t, code, "the admin port is closed once run returned")
}

// Readiness covers the drift sweep: with Redis down, /readyz names the
// sweep beside the consumer when the sweep runs, and only the consumer
// with --sweep=false.
func TestReadinessNamesTheDriftSweep(t *testing.T) {
	t.Parallel()
	broker := kafkatest.New(t)
	schema := pgtest.NewSchema(t)
	redisDown := "redis://" + closedAddr(t) + "/1"
	for _, sweep := range []bool{true, false} {
		t.Run("sweep="+map[bool]string{true: "true", false: "false"}[sweep], func(t *testing.T) {
			t.Parallel()
			s := startService(t,
				"--brokers", strings.Join(broker.Seeds, ","), "--dlt-topic", broker.DLTTopic, "--group", "reconciler-"+kafkatest.Suffix(),
				"--pg-url", schema.URL, "--migrate=false", "--redis-url", redisDown, "--redis-prefix", "unused:",
				"--session-timeout", "6s", "--log-level", "error", "--sweep="+map[bool]string{true: "true", false: "false"}[sweep])
			var code int
			var body string
			// Once every component runs, only Redis is missing.
			require.Eventually(t, func() bool {
				code, body = s.readyz(t)
				return strings.Contains(body, "dead-letter consumer:") && !strings.Contains(body, "not running")
			}, waitFor, 20*time.Millisecond, "readiness never named the running consumer: %d %q", &code, &body)
			require.Equal(t, http.StatusServiceUnavailable, code, body)
			require.Contains(t, body, "dead-letter consumer: pinging redis")
			if sweep {
				// Either the sweep's own ping or its last failed pass names Redis,
				// whichever the sweep reached first.
				require.Regexp(t, `drift sweep: [^\n]*redis unavailable`, body, "the sweep is part of readiness")
			} else {
				require.NotContains(t, body, "drift sweep", "no sweep, nothing to report")
			}
			require.NoError(t, s.stop(t))
		})
	}
}

// freeAddr returns a local address free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// One sweep per cluster by default; "lease" is refused with the reason
// before anything starts.
func TestSweepLeaderElectionFlag(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.ErrorIs(t, run(context.Background(), []string{"--help"}, &out), flag.ErrHelp)
	require.Contains(t, out.String(), "--sweep-leader-election")
	require.Contains(t, out.String(), `(env RECEIPTS_SWEEP_LEADER_ELECTION) (default "postgres")`)

	err := run(context.Background(), []string{"--sweep-leader-election", "lease", "--migrate=false",
		"--admin-addr", "127.0.0.1:0", "--brokers", "127.0.0.1:1"}, &out)
	require.ErrorContains(t, err, `leader election "lease" (a Kubernetes Lease) is not implemented: use "postgres"`)
}
