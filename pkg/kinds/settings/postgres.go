package settings

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/privacy"
)

// Table holds a user's settings (sql/migrations), one row per user who
// ever changed them; a user without one holds the defaults. A statement
// of a view or a change feed that joins it names it through
// kind.ComposeSQL.
const Table = "user_settings"

var (
	//go:embed upsert.sql
	upsertSQL string
	//go:embed users.sql
	usersSQL string
	//go:embed page.sql
	pageSQL string
	//go:embed erase.sql
	eraseSQL string
)

// WritePG merges settings registers (privacy.Merge: the greater version,
// on a tie the one sharing less) in one statement and returns how many
// rows changed. Registers must be unique per user.
func (s Store) WritePG(ctx context.Context, sts []privacy.Settings) (int64, error) {
	if len(sts) == 0 {
		return 0, nil
	}
	users := make([]string, len(sts))
	reads, dels := make([]bool, len(sts)), make([]bool, len(sts))
	vers, levels := make([]int64, len(sts)), make([]int16, len(sts))
	for i, st := range sts {
		users[i], reads[i], dels[i], vers[i] = st.User, st.ShareRead, st.ShareDelivered, st.VersionMs
		levels[i] = int16(st.DefaultLevel)
	}
	tag, err := s.pg.Pool().Exec(ctx, upsertSQL, users, reads, dels, vers, levels)
	if err != nil {
		return 0, pgstore.Classified(fmt.Errorf("upserting %d settings: %w", len(sts), err))
	}
	return tag.RowsAffected(), nil
}

// ReadPG returns users' settings in their order, the defaults for users
// without a row.
func (s Store) ReadPG(ctx context.Context, users []string) ([]privacy.Settings, error) {
	byUser, err := s.StoredPG(ctx, users)
	if err != nil {
		return nil, err
	}
	out := make([]privacy.Settings, len(users))
	for i, u := range users {
		st, ok := byUser[u]
		if !ok {
			st = privacy.Default(u)
		}
		out[i] = st
	}
	return out, nil
}

// StoredPG returns the settings rows of users, by user; a user without a
// row (the defaults) is absent.
func (s Store) StoredPG(ctx context.Context, users []string) (map[string]privacy.Settings, error) {
	found, err := s.query(ctx, usersSQL, users)
	if err != nil {
		return nil, err
	}
	byUser := make(map[string]privacy.Settings, len(found))
	for _, st := range found {
		byUser[st.User] = st
	}
	return byUser, nil
}

// PagePG returns up to limit settings rows with a user id after after,
// in user order: the drift sweep's walk.
func (s Store) PagePG(ctx context.Context, after string, limit int) ([]privacy.Settings, error) {
	return s.query(ctx, pageSQL, after, limit)
}

func (s Store) query(ctx context.Context, sql string, args ...any) ([]privacy.Settings, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, pgstore.Classified(fmt.Errorf("reading settings: %w", err))
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (privacy.Settings, error) {
		var st privacy.Settings
		var level int16
		err := row.Scan(&st.User, &st.ShareRead, &st.ShareDelivered, &st.VersionMs, &level)
		st.DefaultLevel = notification.Level(level)
		return st, err
	})
	if err != nil {
		return nil, pgstore.Classified(fmt.Errorf("reading settings: %w", err))
	}
	return found, nil
}
