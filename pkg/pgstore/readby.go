package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

// UpsertSettings merges settings registers (privacy.Merge: the greater
// version, on a tie the one sharing less) in one statement.
func (s *Store) UpsertSettings(ctx context.Context, sts []privacy.Settings) (int64, error) {
	return upsertSettings(ctx, s.pool, sts)
}

// UpsertSettingsTx is UpsertSettings in a transaction.
func UpsertSettingsTx(ctx context.Context, tx pgx.Tx, sts []privacy.Settings) (int64, error) {
	return upsertSettings(ctx, tx, sts)
}

func upsertSettings(ctx context.Context, db execer, sts []privacy.Settings) (int64, error) {
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
	// The tie rule compares (version, not share_read, not share_delivered)
	// as privacy.Merge does: false sorts below true, so NOT puts "shares
	// less" above; then the quieter default level.
	tag, err := db.Exec(ctx, `
		INSERT INTO user_settings AS t (user_id, share_read, share_delivered, version_ms, default_level)
		SELECT * FROM unnest($1::text[], $2::boolean[], $3::boolean[], $4::bigint[], $5::smallint[])
		ON CONFLICT (user_id) DO UPDATE SET share_read = excluded.share_read,
			share_delivered = excluded.share_delivered, version_ms = excluded.version_ms,
			default_level = excluded.default_level
		WHERE (excluded.version_ms, NOT excluded.share_read, NOT excluded.share_delivered, excluded.default_level)
			> (t.version_ms, NOT t.share_read, NOT t.share_delivered, t.default_level)`,
		users, reads, dels, vers, levels)
	if err != nil {
		return 0, classify(fmt.Errorf("upserting %d settings: %w", len(sts), err))
	}
	return tag.RowsAffected(), nil
}

// Settings returns users' settings, the defaults for users without a row.
func (s *Store) Settings(ctx context.Context, users []string) ([]privacy.Settings, error) {
	byUser, err := s.StoredSettings(ctx, users)
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

// StoredSettings returns the settings rows of users, by user; a user
// without a row (the defaults) is absent.
func (s *Store) StoredSettings(ctx context.Context, users []string) (map[string]privacy.Settings, error) {
	found, err := s.settings(ctx, `SELECT user_id, share_read, share_delivered, version_ms, default_level
		FROM user_settings WHERE user_id = ANY($1)`, users)
	if err != nil {
		return nil, err
	}
	byUser := make(map[string]privacy.Settings, len(found))
	for _, st := range found {
		byUser[st.User] = st
	}
	return byUser, nil
}

// SettingsPage returns up to limit settings rows with a user id after
// after, in user order (the drift sweep's walk).
func (s *Store) SettingsPage(ctx context.Context, after string, limit int) ([]privacy.Settings, error) {
	return s.settings(ctx, `SELECT user_id, share_read, share_delivered, version_ms, default_level
		FROM user_settings WHERE user_id > $1 ORDER BY user_id LIMIT $2`, after, limit)
}

func (s *Store) settings(ctx context.Context, query string, args ...any) ([]privacy.Settings, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, classify(fmt.Errorf("reading settings: %w", err))
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (privacy.Settings, error) {
		var st privacy.Settings
		var level int16
		err := row.Scan(&st.User, &st.ShareRead, &st.ShareDelivered, &st.VersionMs, &level)
		st.DefaultLevel = notification.Level(level)
		return st, err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("reading settings: %w", err))
	}
	return found, nil
}

// MemberCursor is a member's public cursors as Postgres holds them, with
// the member's settings (defaults without a row).
type MemberCursor struct {
	User                      string
	Read, Delivered           receipt.Position
	UpdatedAtUnixMs           int64
	ShareRead, ShareDelivered bool
}

// MemberCursors returns a page of a channel's joined members (user ids
// after afterUser, ascending, at most limit) with their cursors — members
// without a cursor row have zero positions — and their settings.
func (s *Store) MemberCursors(ctx context.Context, ch, afterUser string, limit int) ([]MemberCursor, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT m.user_id,
			coalesce(r.read_epoch, 0), coalesce(r.read_seq, 0),
			coalesce(r.delivered_epoch, 0), coalesce(r.delivered_seq, 0),
			coalesce((extract(epoch FROM r.updated_at) * 1000)::bigint, 0),
			coalesce(st.share_read, true), coalesce(st.share_delivered, true)
		FROM channel_members m
		LEFT JOIN read_receipts r ON r.user_id = m.user_id AND r.channel_id = m.channel_id
		LEFT JOIN user_settings st ON st.user_id = m.user_id
		WHERE m.channel_id = $1 AND m.member AND m.user_id > $2
		ORDER BY m.user_id LIMIT $3`, ch, afterUser, limit)
	if err != nil {
		return nil, classify(fmt.Errorf("reading the member cursors of %s: %w", ch, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MemberCursor, error) {
		var c MemberCursor
		err := row.Scan(&c.User, &c.Read.Epoch, &c.Read.Seq, &c.Delivered.Epoch, &c.Delivered.Seq,
			&c.UpdatedAtUnixMs, &c.ShareRead, &c.ShareDelivered)
		return c, err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("reading the member cursors of %s: %w", ch, err))
	}
	return out, nil
}

// FirstReached returns, per user and kind ('r', 'd'), when the user's
// logged public cursor first reached seq or beyond in the channel
// (Unix ms), from the cursor-move log; users without such a row are
// absent.
func (s *Store) FirstReached(ctx context.Context, ch string, seq int64, users []string) (read, delivered map[string]int64, err error) {
	rows, err := s.pool.Query(ctx, `
		SELECT user_id, kind::text, (extract(epoch FROM min(at)) * 1000)::bigint
		FROM cursor_moves
		WHERE channel_id = $1 AND user_id = ANY($3) AND seq >= $2
		GROUP BY user_id, kind`, ch, seq, users)
	if err != nil {
		return nil, nil, classify(fmt.Errorf("reading the cursor-move log of %s: %w", ch, err))
	}
	defer rows.Close()
	read, delivered = map[string]int64{}, map[string]int64{}
	for rows.Next() {
		var (
			u, k string
			at   int64
		)
		if err := rows.Scan(&u, &k, &at); err != nil {
			return nil, nil, classify(err)
		}
		if k == "r" {
			read[u] = at
		} else {
			delivered[u] = at
		}
	}
	return read, delivered, classify(rows.Err())
}
