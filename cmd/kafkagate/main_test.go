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
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/redistest"
)

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
		if !migrateOnly {
			for _, want := range []string{`"127.0.0.1:8080"`, `"127.0.0.1:9100"`, `"127.0.0.1:9092"`, `"read-receipts"`,
				`"receipts:"`, `"redis://127.0.0.1:6379/0"`, `"5s"`, `"500ms"`, `"500"`, `"1048576"`, `"true"`,
				`".devdata/spool"`, `"268435456"`, `"2s"`} {
				require.Contains(t, help, "(default "+want+")")
			}
		}
	}
}

func TestRunServesMarksAndDrains(t *testing.T) {
	t.Parallel()
	broker := kafkatest.New(t)
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	schema := pgtest.NewSchema(t)
	listen, adminAddr := freeAddr(t), freeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--listen", listen, "--admin-addr", adminAddr,
			"--brokers", strings.Join(broker.Seeds, ","), "--topic", broker.Topic,
			"--redis-prefix", prefix, "--pg-url", schema.URL, "--log-level", "warn",
			"--spool-dir", t.TempDir(),
		}, io.Discard)
	}()

	hc := &http.Client{Timeout: 10 * time.Second}
	require.Eventually(t, func() bool {
		resp, err := hc.Get("http://" + adminAddr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "admin /readyz never became ready")

	resp, err := hc.Post("http://"+listen+"/v1/users/u1/channels/c1/read", "application/json", strings.NewReader(`{"seq": 4}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
	require.Contains(t, string(body), `"durability":"KAFKA"`)

	resp, err = hc.Get("http://" + listen + "/v1/users/u1/read-state")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
	require.Contains(t, string(body), `"seq":"4"`)

	resp, err = hc.Get("http://" + adminAddr + "/metrics")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(body), `receipts_kafkagate_requests_total{code="ok",rpc="MarkRead"} 1`)
	require.Contains(t, string(body), `receipts_kafkagate_kafka_produce_bytes_total`)
	require.Contains(t, string(body), "receipts_kafkagate_spool_records 0")
	require.Contains(t, string(body), "receipts_kafkagate_spool_max_bytes 2.68435456e+08")
	bi := cli.Build()
	require.Contains(t, string(body), fmt.Sprintf("receipts_build_info{goversion=%q,revision=%q,version=%q} 1", bi.GoVersion, bi.Revision, bi.Version))
	require.Contains(t, string(body), "go_sched_pauses_total_gc_seconds_bucket")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("kafkagate did not stop after cancellation")
	}
}

func TestMigrateSubcommandCreatesTheTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgtest.NewSchema(t) // makes sure the test database exists
	conn, err := pgx.Connect(ctx, pgtest.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	schema := "t_gatecmd_" + kafkatest.Suffix()
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })

	u, err := url.Parse(pgtest.URL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	require.NoError(t, run(ctx, []string{"migrate", "--pg-url", u.String(), "--log-level", "warn"}, io.Discard))

	var table *string
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass($1)::text", schema+".read_receipts").Scan(&table))
	require.NotNil(t, table, "read_receipts was not created in %s", schema)
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

// TestShutdownDelayServesWhileUnready: once the run's context ends (what
// SIGTERM does, through cli.Main), /readyz and gRPC health fail at once,
// while the API keeps answering calls for --shutdown-delay; only then does
// the listener close.
func TestShutdownDelayServesWhileUnready(t *testing.T) {
	t.Parallel()
	const delay = 3 * time.Second
	broker := kafkatest.New(t)
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	schema := pgtest.NewSchema(t)
	listen, adminAddr := freeAddr(t), freeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--listen", listen, "--admin-addr", adminAddr,
			"--brokers", strings.Join(broker.Seeds, ","), "--topic", broker.Topic,
			"--redis-prefix", prefix, "--pg-url", schema.URL, "--log-level", "warn",
			"--spool-dir", t.TempDir(), "--shutdown-delay", delay.String(),
		}, io.Discard)
	}()

	hc := &http.Client{Timeout: 10 * time.Second}
	status := func(method, url, body string) (int, string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	readyz := func() int { code, _ := status(http.MethodGet, "http://"+adminAddr+"/readyz", ""); return code }
	health := func() string {
		_, body := status(http.MethodPost, "http://"+listen+"/grpc.health.v1.Health/Check", "{}")
		return body
	}
	require.Eventually(t, func() bool { return readyz() == http.StatusOK }, 20*time.Second, 50*time.Millisecond, "admin /readyz never became ready")
	require.Contains(t, health(), `"SERVING_STATUS_SERVING"`)
	mark := func(seq int) (int, string) {
		return status(http.MethodPost, "http://"+listen+"/v1/users/u1/channels/c1/read", fmt.Sprintf(`{"seq": %d}`, seq))
	}
	code, body := mark(1)
	require.Equal(t, http.StatusOK, code, body)

	stopped := time.Now()
	cancel()
	// Readiness fails at once: long before the delay is over.
	require.Eventually(t, func() bool { return readyz() == http.StatusServiceUnavailable }, delay/3, 10*time.Millisecond,
		"/readyz still ready after the stop began")
	require.Contains(t, health(), `"SERVING_STATUS_NOT_SERVING"`)
	require.Less(t, time.Since(stopped), delay, "readiness failed only after the delay")

	// Every call made during the delay (with a margin for the last one to
	// be sent before it ends) succeeds, marks included.
	calls := 0
	for seq := 2; time.Since(stopped) < delay-time.Second; seq++ {
		code, body := mark(seq)
		require.Equal(t, http.StatusOK, code, "mark %d, %s after the stop began: %s", seq, time.Since(stopped), body)
		calls++
	}
	require.Positive(t, calls, "no call was made during the delay")

	// Then the listener closes (connections are refused), not before the delay.
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err != nil {
			return true
		}
		_ = c.Close()
		return false
	}, delay+10*time.Second, 20*time.Millisecond, "the API listener never closed")
	require.GreaterOrEqual(t, time.Since(stopped), delay, "the listener closed before --shutdown-delay")

	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("kafkagate did not stop after the delay and the drain")
	}
}
