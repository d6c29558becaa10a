package readby

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// The view's Postgres fallback: what a rebuild reads of a channel whose
// view Redis lost (the members with their cursors and settings), and when
// a member first reached a seq (the cursor-move log, which the persister
// writes for small channels).
var (
	//go:embed member_cursors.sql
	memberCursorsTemplate string
	memberCursorsSQL      = kind.ComposeSQL(memberCursorsTemplate, kindTables)
	//go:embed first_reached.sql
	firstReachedSQL string
)

// kindTables are the tables of the kinds the view's statements join:
// each named by its kind.
var kindTables = map[string]string{"cursors": cursors.Table, "members": members.Table, "settings": settings.Table}

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
func (s Store) MemberCursors(ctx context.Context, ch, afterUser string, limit int) ([]MemberCursor, error) {
	rows, err := s.pg.Pool().Query(ctx, memberCursorsSQL, ch, afterUser, limit)
	if err != nil {
		return nil, pgstore.Classified(fmt.Errorf("reading the member cursors of %s: %w", ch, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MemberCursor, error) {
		var c MemberCursor
		err := row.Scan(&c.User, &c.Read.Epoch, &c.Read.Seq, &c.Delivered.Epoch, &c.Delivered.Seq,
			&c.UpdatedAtUnixMs, &c.ShareRead, &c.ShareDelivered)
		return c, err
	})
	if err != nil {
		return nil, pgstore.Classified(fmt.Errorf("reading the member cursors of %s: %w", ch, err))
	}
	return out, nil
}

// FirstReached returns, per user and side, when the user's logged public
// cursor first reached seq or beyond in the channel (Unix ms), from the
// cursor-move log; users without such a row are absent.
func (s Store) FirstReached(ctx context.Context, ch string, seq int64, users []string) (read, delivered map[string]int64, err error) {
	rows, err := s.pg.Pool().Query(ctx, firstReachedSQL, ch, seq, users)
	if err != nil {
		return nil, nil, pgstore.Classified(fmt.Errorf("reading the cursor-move log of %s: %w", ch, err))
	}
	defer rows.Close()
	read, delivered = map[string]int64{}, map[string]int64{}
	for rows.Next() {
		var (
			u, k string
			at   int64
		)
		if err := rows.Scan(&u, &k, &at); err != nil {
			return nil, nil, pgstore.Classified(err)
		}
		if Side(k) == Read {
			read[u] = at
		} else {
			delivered[u] = at
		}
	}
	return read, delivered, pgstore.Classified(rows.Err())
}
