package notifications

import (
	"context"
	_ "embed"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// The registers live in channel_notifications (sql/migrations), one row
// per (user, channel), its primary key in that order.
var (
	//go:embed upsert.sql
	upsertSQL string
	//go:embed user.sql
	userSQL string
	//go:embed userchannels.sql
	userChannelsSQL string
	//go:embed page.sql
	pageSQL string
	//go:embed erase.sql
	eraseSQL string
)

// Compare orders registers by key (user, then channel): the order of
// channel_notifications' primary key.
func Compare(a, b notification.Register) int { return a.Key.Compare(b.Key) }

// WritePG merges registers into Postgres in one statement
// (notification.Merge) and returns how many rows changed. Registers must
// be unique per key.
func (s Store) WritePG(ctx context.Context, regs []notification.Register) (int64, error) {
	if len(regs) == 0 {
		return 0, nil
	}
	sorted := slices.Clone(regs)
	slices.SortFunc(sorted, Compare)
	n := len(sorted)
	users, chs := make([]string, n), make([]string, n)
	levels, muted, vers := make([]int16, n), make([]int64, n), make([]int64, n)
	for i, r := range sorted {
		users[i], chs[i] = r.Key.User, r.Key.Channel
		levels[i], muted[i], vers[i] = int16(r.Level), r.MutedUntilUnixMs, r.VersionUnixMs
	}
	tag, err := s.pg.Pool().Exec(ctx, upsertSQL, users, chs, levels, muted, vers)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// ReadPG returns a user's registers in Postgres, for all channels (at
// most pgstore.MaxChannelsPerRead) or the listed ones, in channel order.
func (s Store) ReadPG(ctx context.Context, user string, channels []string) ([]notification.Register, error) {
	if len(channels) == 0 {
		return s.query(ctx, userSQL, user, pgstore.MaxChannelsPerRead)
	}
	return s.query(ctx, userChannelsSQL, user, channels)
}

// PagePG returns up to limit registers with keys after the given one in
// (user, channel) order: the drift sweep's walk.
func (s Store) PagePG(ctx context.Context, after receipt.Key, limit int) ([]notification.Register, error) {
	return s.query(ctx, pageSQL, after.User, after.Channel, limit)
}

func (s Store) query(ctx context.Context, sql string, args ...any) ([]notification.Register, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (notification.Register, error) {
		var r notification.Register
		var level int16
		err := row.Scan(&r.Key.User, &r.Key.Channel, &level, &r.MutedUntilUnixMs, &r.VersionUnixMs)
		r.Level = notification.Level(level)
		return r, err
	})
	return out, pgstore.Classified(err)
}
