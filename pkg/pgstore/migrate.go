package pgstore

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	sqlfiles "github.com/readstate/receipts/sql"
)

const (
	// VersionTable is tern's one-row table holding how many of the
	// embedded migrations the schema has (in the search path's first
	// schema, as the tables are).
	VersionTable = "schema_version"
	// legacyTable is the bookkeeping of the hand-written migrator tern
	// replaced: one row per applied migration, by name. Migrate reads it
	// once, to start tern's version where it left off, and leaves it.
	legacyTable = "schema_migrations"
	// migrateLockName names the advisory lock that serializes the
	// migrators of one schema (with the schema: the key is
	// hashtextextended(name || ':' || current_schema(), 0), as a leader's
	// lock): the deployments of one database in schemas of their own (a
	// test database holds one per test) migrate side by side.
	migrateLockName = "migrate"
)

// migrations are the embedded migrations' directory, NNNN_name.up.sql.
func migrations() (fs.FS, error) { return fs.Sub(sqlfiles.Migrations, "migrations") }

// Migrate applies the embedded migrations not yet applied, in order, each
// in its own transaction that also moves tern's version
// (github.com/jackc/tern/v2/migrate), on a connection of its own under an
// advisory lock, so concurrent starts are safe. It returns the names
// applied (as "0001_read_receipts"), with the error those applied before a
// failure. A database migrated by the hand-written migrator (its
// schema_migrations table, no schema_version) is adopted first: tern's
// version starts at the number of migrations it had applied. A schema
// ahead of this binary's migrations (a newer release ran) is left alone.
func (s *Store) Migrate(ctx context.Context) (applied []string, err error) {
	dir, err := migrations()
	if err != nil {
		return nil, fmt.Errorf("listing migrations: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, classify(fmt.Errorf("connecting to migrate: %w", err))
	}
	// Closing the session releases its advisory locks, whatever happened.
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err = migrateOn(ctx, conn, dir)
	if err != nil {
		return applied, classify(fmt.Errorf("migrating: %w", err))
	}
	return applied, nil
}

func migrateOn(ctx context.Context, conn *pgx.Conn, dir fs.FS) ([]string, error) {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1 || ':' || current_schema(), 0))`, migrateLockName); err != nil {
		return nil, err
	}
	names, err := migrate.FindMigrations(dir)
	if err != nil {
		return nil, fmt.Errorf("listing migrations: %w", err)
	}
	for i, n := range names {
		names[i] = strings.TrimSuffix(strings.TrimSuffix(n, ".sql"), ".up")
	}
	if err := adoptLegacy(ctx, conn, names); err != nil {
		return nil, err
	}
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("preparing %s: %w", VersionTable, err)
	}
	if err := m.LoadMigrations(dir); err != nil {
		return nil, fmt.Errorf("loading migrations: %w", err)
	}
	before, err := m.GetCurrentVersion(ctx)
	if err != nil {
		return nil, err
	}
	if int(before) > len(names) {
		return nil, nil
	}
	err = m.Migrate(ctx)
	after, verr := m.GetCurrentVersion(context.WithoutCancel(ctx))
	if verr != nil {
		after = before
	}
	return names[before:after], err
}

// adoptLegacy starts tern's version table, when it is missing, at the
// number of migrations the hand-written migrator recorded in its table. It
// applied them in name order in one transaction, so they must be the
// first ones of names; anything else is refused rather than guessed.
func adoptLegacy(ctx context.Context, conn *pgx.Conn, names []string) error {
	var hasVersion, hasLegacy bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL`,
		VersionTable, legacyTable).Scan(&hasVersion, &hasLegacy); err != nil {
		return err
	}
	if hasVersion || !hasLegacy {
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT version FROM `+legacyTable+` ORDER BY version`)
	if err != nil {
		return err
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("reading %s: %w", legacyTable, err)
	}
	if len(done) > len(names) || !slices.Equal(done, names[:len(done)]) {
		return fmt.Errorf("%s records %v, not the first of the embedded migrations %v: set %s by hand", legacyTable, done, names, VersionTable)
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (version int4 NOT NULL); INSERT INTO %[1]s (version) VALUES (%[2]d)`,
			VersionTable, len(done)))
		return err
	})
}
