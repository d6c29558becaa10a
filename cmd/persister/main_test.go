package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/cmd/internal/cli"
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
