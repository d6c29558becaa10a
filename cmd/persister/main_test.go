package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgtest"
)

func TestHelpListsEveryFlagWithEnvAndDefault(t *testing.T) {
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
		fs := c.svc.FlagSet(&bytes.Buffer{}, c.registerFlags)
		n := 0
		fs.VisitAll(func(f *flag.Flag) {
			n++
			require.Contains(t, help, "--"+f.Name)
			require.Contains(t, help, "(env "+cli.EnvName(f.Name)+")")
		})
		require.Equal(t, n, strings.Count(help, "(default "), help)
		if !migrateOnly {
			for _, want := range []string{`"127.0.0.1:9101"`, `"receipts-persister"`, `"500"`, `"20ms"`, `"50000"`, `"true"`, `"read-receipts-dlt"`, `"2"`, `"262144"`, `"400"`} {
				require.Contains(t, help, "(default "+want+")")
			}
		}
	}
}

func TestMigrateSubcommandCreatesTheTables(t *testing.T) {
	ctx := context.Background()
	pgtest.NewSchema(t) // makes sure the test database exists
	conn, err := pgx.Connect(ctx, pgtest.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	sfx := make([]byte, 5)
	_, _ = rand.Read(sfx)
	schema := "t_cmd_" + hex.EncodeToString(sfx)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })

	u, err := url.Parse(pgtest.URL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Setenv(cli.EnvName("pg-url"), u.String())
	require.NoError(t, run(context.Background(), []string{"migrate", "--log-level", "warn"}, &bytes.Buffer{}))

	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = $1 AND table_name IN ('read_receipts', 'parked_dead_letters', 'schema_version')`, schema).Scan(&n))
	require.Equal(t, 3, n)
	// Twice is fine.
	require.NoError(t, run(context.Background(), []string{"migrate", "--log-level", "warn"}, &bytes.Buffer{}))
}

func TestUnexpectedArgumentsFail(t *testing.T) {
	require.ErrorContains(t, run(context.Background(), []string{"serve-please"}, &bytes.Buffer{}), "unexpected arguments")
}

func TestPoolSizeCoversTheWriters(t *testing.T) {
	require.Equal(t, int32(8), persister.PoolSize(0, 2), "the store's default covers the default writers")
	require.Equal(t, int32(17), persister.PoolSize(0, 16), "one per writer plus one for readiness")
	require.Equal(t, int32(3), persister.PoolSize(3, 16), "an explicit size wins (and persister.New checks it)")
}

// An explicit pool smaller than the writers is refused at start-up, from
// flags or from the environment.
func TestPoolSmallerThanWritersFails(t *testing.T) {
	pgtest.NewSchema(t) // makes sure the test database exists
	t.Setenv(cli.EnvName("pg-url"), pgtest.URL())
	base := []string{"--admin-addr", "127.0.0.1:0", "--migrate=false", "--log-level", "warn"}
	err := run(context.Background(), append(base, "--pg-max-conns", "1", "--writers", "2"), &bytes.Buffer{})
	require.ErrorContains(t, err, "the Postgres pool has 1 connections, fewer than Writers 2")

	t.Setenv(cli.EnvName("writers"), "3")
	t.Setenv(cli.EnvName("pg-max-conns"), "2")
	err = run(context.Background(), base, &bytes.Buffer{})
	require.ErrorContains(t, err, "fewer than Writers 3")
}

// A fetch minimum beyond the fetch bound is refused at start-up.
func TestFetchMinBeyondFetchMaxFails(t *testing.T) {
	pgtest.NewSchema(t)
	t.Setenv(cli.EnvName("pg-url"), pgtest.URL())
	err := run(context.Background(), []string{"--admin-addr", "127.0.0.1:0", "--migrate=false", "--log-level", "warn",
		"--fetch-min-bytes", "8388608", "--fetch-max-bytes", "4194304"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "FetchMinBytes (8388608) must be within [1, FetchMaxBytes]")
}

// The persister runs with the move-log upkeep beside it: once ready, the
// upkeep leads (a lone replica) and the log's partitions exist.
func TestServiceRunsTheMoveLogUpkeep(t *testing.T) {
	t.Parallel()
	broker := kafkatest.New(t)
	schema := pgtest.NewSchema(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	admin := ln.Addr().String()
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--admin-addr", admin, "--log-level", "warn", "--migrate=false", "--pg-url", schema.URL,
			"--brokers", strings.Join(broker.Seeds, ","), "--topic", broker.Topic, "--dlt-topic", broker.DLTTopic,
			"--group", "persister-" + kafkatest.Suffix()}, io.Discard)
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, "move-log upkeep: leader (holds the Postgres advisory lock)")
	}, 30*time.Second, 20*time.Millisecond, "readiness never named the upkeep's leader: %q", &body)
	resp, err := http.Get("http://" + admin + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	bi := cli.Build()
	require.Contains(t, string(metrics), fmt.Sprintf("receipts_build_info{goversion=%q,revision=%q,version=%q} 1", bi.GoVersion, bi.Revision, bi.Version))
	var n int
	require.NoError(t, schema.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_inherits i
		JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace ns ON ns.oid = p.relnamespace
		WHERE p.relname = 'cursor_moves' AND ns.nspname = $1`, schema.Name).Scan(&n))
	require.Positive(t, n, "the upkeep's first pass created the log's partitions")
}
