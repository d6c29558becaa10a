package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The tables of migration 0004 are kinds of their own (pkg/kinds/heads,
// pkg/kinds/members, pkg/kinds/mentions); here is the read of a user's
// default channel set, which reads the cursors' table beside the
// registers'.

// DefaultChannelsAfter returns up to limit channels of a user's default
// set (those with a cursor or a register, less those the user left)
// after the given one ("" first), in channel order: the default set of a
// user of any size in bounded pages.
func (s *Store) DefaultChannelsAfter(ctx context.Context, user, after string, limit int) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT c FROM (
		SELECT channel_id AS c FROM read_receipts WHERE user_id = $1 AND channel_id > $2
		UNION SELECT channel_id FROM channel_members WHERE user_id = $1 AND channel_id > $2) x
		WHERE NOT EXISTS (SELECT 1 FROM channel_members m WHERE m.user_id = $1 AND m.channel_id = x.c AND NOT m.member)
		ORDER BY c LIMIT $3`, user, after, limit)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, classify(err)
}
