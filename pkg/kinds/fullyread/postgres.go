package fullyread

import (
	"context"
	_ "embed"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/pgstore"
)

// The markers live in fully_read (sql/migrations), one row per (user,
// channel, root), its primary key in that order.
var (
	//go:embed upsert.sql
	upsertSQL string
	//go:embed get.sql
	getSQL string
	//go:embed user.sql
	userSQL string
	//go:embed page.sql
	pageSQL string
	//go:embed erase.sql
	eraseSQL string
)

// Compare orders markers by ref: the order of fully_read's primary key.
func Compare(a, b Marker) int { return a.Ref.Compare(b.Ref) }

// WritePG merges markers into Postgres in one statement (Merge) and
// returns how many rows changed. Markers must be unique per ref.
func (s Store) WritePG(ctx context.Context, ms []Marker) (int64, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	sorted := slices.Clone(ms)
	slices.SortFunc(sorted, Compare)
	n := len(sorted)
	users, chs, msgs := make([]string, n), make([]string, n), make([]string, n)
	roots, seqs, times := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, m := range sorted {
		users[i], chs[i], roots[i] = m.Key.User, m.Key.Channel, m.Root
		seqs[i], msgs[i], times[i] = m.Seq, m.MessageID, m.UpdatedAtUnixMs
	}
	tag, err := s.pg.Pool().Exec(ctx, upsertSQL, users, chs, roots, seqs, msgs, times)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// ReadPG returns the markers of refs that have one.
func (s Store) ReadPG(ctx context.Context, refs []Ref) ([]Marker, error) {
	n := len(refs)
	users, chs, roots := make([]string, n), make([]string, n), make([]int64, n)
	for i, r := range refs {
		users[i], chs[i], roots[i] = r.Key.User, r.Key.Channel, r.Root
	}
	return s.query(ctx, getSQL, users, chs, roots)
}

// UserPG returns a user's markers, at most limit, in (channel, root)
// order: what hydrates the user's hash.
func (s Store) UserPG(ctx context.Context, user string, limit int) ([]Marker, error) {
	return s.query(ctx, userSQL, user, limit)
}

// PagePG returns up to limit markers after the given ref, in ref order:
// the drift sweep's walk.
func (s Store) PagePG(ctx context.Context, after Ref, limit int) ([]Marker, error) {
	return s.query(ctx, pageSQL, after.Key.User, after.Key.Channel, after.Root, limit)
}

func (s Store) query(ctx context.Context, sql string, args ...any) ([]Marker, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Marker, error) {
		var m Marker
		err := row.Scan(&m.Key.User, &m.Key.Channel, &m.Root, &m.Seq, &m.MessageID, &m.UpdatedAtUnixMs)
		return m, err
	})
	return out, pgstore.Classified(err)
}
