package pgstore

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// The guard's tuple is notification.Register.Compare's order.
const upsertNotificationsSQL = `
INSERT INTO channel_notifications AS t (user_id, channel_id, level, muted_until_ms, version_ms)
SELECT u, c, l, m, v
FROM unnest($1::text[], $2::text[], $3::smallint[], $4::bigint[], $5::bigint[]) AS x(u, c, l, m, v)
ON CONFLICT (user_id, channel_id) DO UPDATE SET
    level = excluded.level, muted_until_ms = excluded.muted_until_ms, version_ms = excluded.version_ms
WHERE (excluded.version_ms, excluded.level, excluded.muted_until_ms)
    > (t.version_ms, t.level, t.muted_until_ms)`

// UpsertNotifications merges notification registers into
// channel_notifications in one statement (notification.Merge) and returns
// how many rows changed. Registers must be unique per key.
func (s *Store) UpsertNotifications(ctx context.Context, regs []notification.Register) (int64, error) {
	if len(regs) == 0 {
		return 0, nil
	}
	sorted := slices.Clone(regs)
	slices.SortFunc(sorted, CompareNotifications)
	n := len(sorted)
	users, chs := make([]string, n), make([]string, n)
	levels, muted, vers := make([]int16, n), make([]int64, n), make([]int64, n)
	for i, r := range sorted {
		users[i], chs[i] = r.Key.User, r.Key.Channel
		levels[i], muted[i], vers[i] = int16(r.Level), r.MutedUntilUnixMs, r.VersionUnixMs
	}
	tag, err := s.pool.Exec(ctx, upsertNotificationsSQL, users, chs, levels, muted, vers)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

// CompareNotifications orders registers by key (user, then channel): the
// order of channel_notifications' primary key.
func CompareNotifications(a, b notification.Register) int { return a.Key.Compare(b.Key) }

const notificationColumns = `user_id, channel_id, level, muted_until_ms, version_ms`

func (s *Store) notifications(ctx context.Context, sql string, args ...any) ([]notification.Register, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (notification.Register, error) {
		var r notification.Register
		var level int16
		err := row.Scan(&r.Key.User, &r.Key.Channel, &level, &r.MutedUntilUnixMs, &r.VersionUnixMs)
		r.Level = notification.Level(level)
		return r, err
	})
	return out, classify(err)
}

// Notifications returns a user's registers, for all channels (at most
// MaxChannelsPerRead) or the listed ones, in channel order.
func (s *Store) Notifications(ctx context.Context, user string, channels []string) ([]notification.Register, error) {
	if len(channels) == 0 {
		return s.notifications(ctx, `SELECT `+notificationColumns+` FROM channel_notifications
			WHERE user_id = $1 ORDER BY channel_id LIMIT $2`, user, MaxChannelsPerRead)
	}
	return s.notifications(ctx, `SELECT `+notificationColumns+` FROM channel_notifications
		WHERE user_id = $1 AND channel_id = ANY($2) ORDER BY channel_id`, user, channels)
}

// NotificationsPage returns up to limit registers with keys after the
// given one in (user, channel) order: the drift sweep's walk.
func (s *Store) NotificationsPage(ctx context.Context, after receipt.Key, limit int) ([]notification.Register, error) {
	return s.notifications(ctx, `SELECT `+notificationColumns+` FROM channel_notifications
		WHERE (user_id, channel_id) > ($1, $2) ORDER BY user_id, channel_id LIMIT $3`, after.User, after.Channel, limit)
}
