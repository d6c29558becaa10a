// Package pgtest gives each test its own Postgres schema, migrated from the
// embedded sql/ migrations and dropped when the test ends, in the database
// named by TEST_DATABASE_URL (default receipts_test on 127.0.0.1, created if
// missing). Only _test.go files import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/pgstore"
)

// URLDefault is the test database when TEST_DATABASE_URL is unset.
const URLDefault = "postgres://postgres@127.0.0.1:5432/receipts_test?sslmode=disable"

// URL returns the test database URL.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return URLDefault
}

var ensureOnce sync.Once
var ensureErr error

// EnsureDatabase creates the database of dbURL when it is missing, by
// connecting to the server's "postgres" database.
func EnsureDatabase(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", admin.Redacted(), err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	return err
}

// Schema is a migrated, empty schema of one test.
type Schema struct {
	Name  string
	URL   string // the test database URL with search_path set to Name
	Store *pgstore.Store
}

// catalogDeadMax is how many dead rows pg_attribute may hold before a
// test process compacts the test database's catalogs (compactCatalogs).
const catalogDeadMax = 200_000

// compactCatalogs rewrites the catalogs of the test database (VACUUM FULL)
// when they hold more than catalogDeadMax dead rows. Every test creates
// and drops a schema of some hundred tables, and a server run without
// autovacuum (as CI machines may be: it is a server setting) keeps every
// dead catalog row: past a few million, each migration took 2.3 s
// instead of 0.2 s. The rewrite takes seconds and briefly holds the
// catalogs' locks; the test processes that start beside it wait.
func compactCatalogs(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting to the test database: %w", err)
	}
	defer conn.Close(ctx)
	var dead int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(n_dead_tup), 0) FROM pg_stat_sys_tables WHERE relname = 'pg_attribute'`).Scan(&dead); err != nil {
		return fmt.Errorf("reading the catalogs' dead rows: %w", err)
	}
	if dead <= catalogDeadMax {
		return nil
	}
	_, err = conn.Exec(ctx, `VACUUM FULL pg_catalog.pg_attribute, pg_catalog.pg_class, pg_catalog.pg_depend,
		pg_catalog.pg_constraint, pg_catalog.pg_attrdef, pg_catalog.pg_type, pg_catalog.pg_index, pg_catalog.pg_inherits`)
	if err != nil {
		return fmt.Errorf("compacting the test database's catalogs (%d dead rows): %w", dead, err)
	}
	return nil
}

// NewSchema creates and migrates a fresh schema in the test database, and
// drops it at cleanup.
func NewSchema(t testing.TB) *Schema {
	t.Helper()
	ensureOnce.Do(func() {
		ctx := context.Background()
		if ensureErr = EnsureDatabase(ctx, URL()); ensureErr == nil {
			ensureErr = compactCatalogs(ctx, URL())
		}
	})
	require.NoError(t, ensureErr, "creating the test database (is Postgres running? see scripts/services.sh)")
	return NewSchemaAt(t, URL())
}

// NewSchemaAt creates and migrates a fresh schema in the existing database
// of base (a server of the test's own: StartServer), and drops it at
// cleanup.
func NewSchemaAt(t testing.TB, base string) *Schema {
	t.Helper()
	ctx := context.Background()

	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE SCHEMA `+name)
	require.NoError(t, err)
	_ = conn.Close(ctx)

	st, err := pgstore.Open(ctx, pgstore.Config{URL: base, Schema: name, MaxConns: 4})
	require.NoError(t, err)
	_, err = st.Migrate(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		st.Close()
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), `DROP SCHEMA `+name+` CASCADE`)
	})
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return &Schema{Name: name, URL: u.String(), Store: st}
}
