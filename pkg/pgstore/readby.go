package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/privacy"
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
	vers := make([]int64, len(sts))
	for i, st := range sts {
		users[i], reads[i], dels[i], vers[i] = st.User, st.ShareRead, st.ShareDelivered, st.VersionMs
	}
	// The tie rule compares (version, not share_read, not share_delivered)
	// as privacy.Merge does: false sorts below true, so NOT puts "shares
	// less" above.
	tag, err := db.Exec(ctx, `
		INSERT INTO user_settings AS t (user_id, share_read, share_delivered, version_ms)
		SELECT * FROM unnest($1::text[], $2::boolean[], $3::boolean[], $4::bigint[])
		ON CONFLICT (user_id) DO UPDATE SET share_read = excluded.share_read,
			share_delivered = excluded.share_delivered, version_ms = excluded.version_ms
		WHERE (excluded.version_ms, NOT excluded.share_read, NOT excluded.share_delivered)
			> (t.version_ms, NOT t.share_read, NOT t.share_delivered)`,
		users, reads, dels, vers)
	if err != nil {
		return 0, classify(fmt.Errorf("upserting %d settings: %w", len(sts), err))
	}
	return tag.RowsAffected(), nil
}

// Settings returns users' settings, the defaults for users without a row.
func (s *Store) Settings(ctx context.Context, users []string) ([]privacy.Settings, error) {
	rows, err := s.pool.Query(ctx, `SELECT user_id, share_read, share_delivered, version_ms
		FROM user_settings WHERE user_id = ANY($1)`, users)
	if err != nil {
		return nil, classify(fmt.Errorf("reading settings: %w", err))
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (privacy.Settings, error) {
		var st privacy.Settings
		err := row.Scan(&st.User, &st.ShareRead, &st.ShareDelivered, &st.VersionMs)
		return st, err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("reading settings: %w", err))
	}
	byUser := make(map[string]privacy.Settings, len(found))
	for _, st := range found {
		byUser[st.User] = st
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
