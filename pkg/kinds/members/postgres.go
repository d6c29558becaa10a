package members

import (
	"context"
	_ "embed"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

var (
	//go:embed write.sql
	writeSQL string
	//go:embed user.sql
	userSQL string
	//go:embed userchannels.sql
	userChannelsSQL string
	//go:embed userpage.sql
	userPageSQL string
	//go:embed channelpage.sql
	channelPageSQL string
	//go:embed channelusers.sql
	channelUsersSQL string
	//go:embed count.sql
	countSQL string
	//go:embed page.sql
	pageSQL string
	//go:embed erase.sql
	eraseSQL string
	//go:embed channels.sql
	channelsSQL string
)

// Table is the membership registers' table (sql/migrations): one row per
// (channel, user), its primary key in that order. A view's statement
// that joins it names it through kind.ComposeSQL.
const Table = "channel_members"

// Compare orders registers by key (channel, then user): the order of
// channel_members' primary key, in which rows are written and paged.
func Compare(a, b channel.Membership) int {
	if c := strings.Compare(a.Key.Channel, b.Key.Channel); c != 0 {
		return c
	}
	return strings.Compare(a.Key.User, b.Key.User)
}

// WritePG merges registers into channel_members in one statement (the
// greater register wins, channel.Membership.Compare) and returns how many
// rows changed. Registers must be unique per key.
func (s Store) WritePG(ctx context.Context, regs []channel.Membership) (int64, error) {
	if len(regs) == 0 {
		return 0, nil
	}
	// The rows in key order: concurrent writers lock them in one order.
	sorted := slices.Clone(regs)
	slices.SortFunc(sorted, Compare)
	n := len(sorted)
	chs, users, members := make([]string, n), make([]string, n), make([]bool, n)
	vs, vm, js := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, m := range sorted {
		chs[i], users[i], members[i] = m.Key.Channel, m.Key.User, m.Member
		vs[i], vm[i], js[i] = m.VersionSeq, m.VersionUnixMs, m.JoinSeq
	}
	tag, err := s.pg.Pool().Exec(ctx, writeSQL, chs, users, members, vs, vm, js)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// ReadPG returns a user's registers (left channels included), for all
// channels (at most pgstore.MaxChannelsPerRead) or the listed ones, in
// channel order.
func (s Store) ReadPG(ctx context.Context, user string, channels []string) ([]channel.Membership, error) {
	if len(channels) == 0 {
		return s.query(ctx, userSQL, user, pgstore.MaxChannelsPerRead)
	}
	return s.query(ctx, userChannelsSQL, user, channels)
}

// UserPagePG returns up to limit of a user's registers with a channel
// after the given one ("" first), in channel order: a whole user in
// bounded pages, however many channels.
func (s Store) UserPagePG(ctx context.Context, user, after string, limit int) ([]channel.Membership, error) {
	return s.query(ctx, userPageSQL, user, after, limit)
}

// ChannelPagePG returns up to limit registers of a channel with user ids
// after afterUser, in user order; membersOnly leaves out those who left.
func (s Store) ChannelPagePG(ctx context.Context, ch, afterUser string, limit int, membersOnly bool) ([]channel.Membership, error) {
	return s.query(ctx, channelPageSQL, ch, afterUser, limit, membersOnly)
}

// ChannelUsersPG returns the registers of the listed users in a channel
// (left ones included), in user order: the gateway's membership check of
// a channel too large to hydrate into Redis.
func (s Store) ChannelUsersPG(ctx context.Context, ch string, users []string) ([]channel.Membership, error) {
	return s.query(ctx, channelUsersSQL, ch, users)
}

// CountPG returns how many users are members of a channel now.
func (s Store) CountPG(ctx context.Context, ch string) (int64, error) {
	var n int64
	err := s.pg.Pool().QueryRow(ctx, countSQL, ch).Scan(&n)
	return n, pgstore.Classified(err)
}

// PagePG returns up to limit registers with keys after the given one in
// (channel, user) order: the drift sweep's walk.
func (s Store) PagePG(ctx context.Context, after receipt.Key, limit int) ([]channel.Membership, error) {
	return s.query(ctx, pageSQL, after.Channel, after.User, limit)
}

func (s Store) query(ctx context.Context, sql string, args ...any) ([]channel.Membership, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (channel.Membership, error) {
		var m channel.Membership
		err := row.Scan(&m.Key.Channel, &m.Key.User, &m.Member, &m.VersionSeq, &m.VersionUnixMs, &m.JoinSeq)
		return m, err
	})
	return out, pgstore.Classified(err)
}
