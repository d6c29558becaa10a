package unread

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/pgstore"
)

var (
	//go:embed default_channels.sql
	defaultChannelsTemplate string
	defaultChannelsSQL      = kind.ComposeSQL(defaultChannelsTemplate,
		map[string]string{"cursors": cursors.Table, "members": members.Table})
)

// DefaultChannelsPG returns up to limit channels of a user's default set
// (those with a cursor or a register, less those the user left) after
// the given one ("" first), in channel order: the default set of a user
// of any size in bounded pages, from Postgres.
func (s Store) DefaultChannelsPG(ctx context.Context, user, after string, limit int) ([]string, error) {
	rows, err := s.pg.Pool().Query(ctx, defaultChannelsSQL, user, after, limit)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, pgstore.Classified(err)
}
