package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/receipt"
)

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
