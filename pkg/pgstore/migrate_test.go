package pgstore_test

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	sqlfiles "github.com/readstate/receipts/sql"
)

// migrationNames are the embedded migrations' names, in order.
func migrationNames(t *testing.T) []string {
	t.Helper()
	files, err := fs.Glob(sqlfiles.Migrations, "migrations/*.up.sql")
	require.NoError(t, err)
	slices.Sort(files)
	for i, f := range files {
		files[i] = strings.TrimSuffix(strings.TrimPrefix(f, "migrations/"), ".up.sql")
	}
	require.NotEmpty(t, files)
	return files
}

// bareSchema is an empty schema (pgtest's, emptied) and a store on it.
func bareSchema(t *testing.T) (*pgtest.Schema, *pgstore.Store) {
	t.Helper()
	ctx := context.Background()
	schema := pgtest.NewSchema(t)
	_, err := schema.Store.Pool().Exec(ctx, `DROP SCHEMA `+schema.Name+` CASCADE; CREATE SCHEMA `+schema.Name)
	require.NoError(t, err)
	st, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.URL(), Schema: schema.Name, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return schema, st
}

// legacyMigrate does what the hand-written migrator did for the first n
// migrations: applies them in one transaction and records each by name in
// schema_migrations.
func legacyMigrate(t *testing.T, st *pgstore.Store, n int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		for _, name := range migrationNames(t)[:n] {
			body, err := fs.ReadFile(sqlfiles.Migrations, "migrations/"+name+".up.sql")
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, name); err != nil {
				return err
			}
		}
		return nil
	}))
}

func version(t *testing.T, st *pgstore.Store) int {
	t.Helper()
	var v int
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT version FROM `+pgstore.VersionTable).Scan(&v))
	return v
}

// A fresh schema gets every migration and tern's version; a second run
// applies nothing. The tables land in the store's schema (tern's "reset
// all" between migrations keeps the connection's search_path).
func TestMigrateFreshSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, st := bareSchema(t)
	names := migrationNames(t)

	applied, err := st.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, names, applied)
	require.Equal(t, len(names), version(t, st))
	var tables []string
	rows, err := st.Pool().Query(ctx, `SELECT table_name::text FROM information_schema.tables
		WHERE table_schema = $1 AND table_name IN ('read_receipts', 'cursor_moves', 'schema_version', 'schema_migrations') ORDER BY 1`, schema.Name)
	require.NoError(t, err)
	tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"cursor_moves", "read_receipts", "schema_version"}, tables)

	applied, err = st.Migrate(ctx)
	require.NoError(t, err)
	require.Empty(t, applied)
}

// The upgrade path: a database the hand-written migrator migrated (all of
// it, or the first migrations of an older release) is adopted: tern's
// version starts at the count it recorded, only the rest is applied, and
// the data stays.
func TestMigrateAdoptsTheHandWrittenMigratorsDatabase(t *testing.T) {
	t.Parallel()
	names := migrationNames(t)
	for _, done := range []int{len(names), 3} {
		t.Run(names[done-1], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, st := bareSchema(t)
			legacyMigrate(t, st, done)
			// A row written before the upgrade, in migration 0001's columns.
			_, err := st.Pool().Exec(ctx, `INSERT INTO read_receipts (user_id, channel_id, read_seq, read_message_id, delivered_seq, delivered_message_id)
				VALUES ('alice', 'c1', 7, 'm7', 7, 'm7')`)
			require.NoError(t, err)

			applied, err := st.Migrate(ctx)
			require.NoError(t, err)
			require.Equal(t, names[done:], applied, "only what the old migrator had not applied")
			require.Equal(t, len(names), version(t, st))
			var seq, privateSeq int64
			require.NoError(t, st.Pool().QueryRow(ctx, `SELECT read_seq, private_read_seq FROM read_receipts WHERE user_id = 'alice'`).Scan(&seq, &privateSeq))
			require.Equal(t, int64(7), seq)
			require.Zero(t, privateSeq, "the columns added later take their defaults")

			applied, err = st.Migrate(ctx)
			require.NoError(t, err)
			require.Empty(t, applied)
		})
	}
}

// Old bookkeeping that is not a prefix of the embedded migrations is
// refused, not guessed at; a schema ahead of the binary is left alone.
func TestMigrateRefusesUnknownHistoryAndLeavesANewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, st := bareSchema(t)
	_, err := st.Pool().Exec(ctx, `CREATE TABLE schema_migrations (version text PRIMARY KEY);
		INSERT INTO schema_migrations VALUES ('0002_parked_dead_letters')`)
	require.NoError(t, err)
	_, err = st.Migrate(ctx)
	require.ErrorContains(t, err, "schema_migrations records [0002_parked_dead_letters], not the first of the embedded migrations")

	_, newer := bareSchema(t)
	_, err = newer.Migrate(ctx)
	require.NoError(t, err)
	_, err = newer.Pool().Exec(ctx, `UPDATE `+pgstore.VersionTable+` SET version = 99`)
	require.NoError(t, err)
	applied, err := newer.Migrate(ctx)
	require.NoError(t, err, "a newer release migrated this schema")
	require.Empty(t, applied)
	require.Equal(t, 99, version(t, newer))
}

// Replicas starting together: each migration is applied exactly once.
func TestMigrateConcurrentStarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, st := bareSchema(t)
	var mu sync.Mutex
	var all []string
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			applied, err := st.Migrate(ctx)
			assert.NoError(t, err)
			mu.Lock()
			all = append(all, applied...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(all)
	require.Equal(t, migrationNames(t), all)
}
