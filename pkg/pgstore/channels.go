package pgstore

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// The channel members of migration 0004 (a versioned register); its
// heads and mentions are kinds of their own (pkg/kinds/heads,
// pkg/kinds/mentions). Each write is one statement per call from parameter
// arrays, with the rows in key order, and merges by the rule of
// pkg/channel, so duplicates, reordering and replays are harmless; callers
// dedupe per key first (ON CONFLICT cannot touch a row twice in one
// statement).

const upsertMembersSQL = `
INSERT INTO channel_members AS t (channel_id, user_id, member, version_seq, version_ms, join_seq)
SELECT c, u, m, vs, vm, js
FROM unnest($1::text[], $2::text[], $3::boolean[], $4::bigint[], $5::bigint[], $6::bigint[]) AS x(c, u, m, vs, vm, js)
ON CONFLICT (channel_id, user_id) DO UPDATE SET
    member = excluded.member, version_seq = excluded.version_seq,
    version_ms = excluded.version_ms, join_seq = excluded.join_seq
WHERE (excluded.version_seq, excluded.version_ms, excluded.member, excluded.join_seq)
    > (t.version_seq, t.version_ms, t.member, t.join_seq)`

// CompareMembers orders registers by key (channel, then user): the order
// of channel_members' primary key, in which rows are written and paged.
func CompareMembers(a, b channel.Membership) int {
	if c := strings.Compare(a.Key.Channel, b.Key.Channel); c != 0 {
		return c
	}
	return strings.Compare(a.Key.User, b.Key.User)
}

// UpsertMembers merges membership registers into channel_members in one
// statement (the greater register wins, channel.Membership.Compare: the
// tuple order of the guard is the same, false < true) and returns how many
// rows changed. Registers must be unique per key.
func (s *Store) UpsertMembers(ctx context.Context, regs []channel.Membership) (int64, error) {
	if len(regs) == 0 {
		return 0, nil
	}
	sorted := slices.Clone(regs)
	slices.SortFunc(sorted, CompareMembers)
	n := len(sorted)
	chs, users, members := make([]string, n), make([]string, n), make([]bool, n)
	vs, vm, js := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, m := range sorted {
		chs[i], users[i], members[i] = m.Key.Channel, m.Key.User, m.Member
		vs[i], vm[i], js[i] = m.VersionSeq, m.VersionUnixMs, m.JoinSeq
	}
	tag, err := s.pool.Exec(ctx, upsertMembersSQL, chs, users, members, vs, vm, js)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

const memberColumns = `channel_id, user_id, member, version_seq, version_ms, join_seq`

func scanMember(row pgx.CollectableRow) (channel.Membership, error) {
	var m channel.Membership
	err := row.Scan(&m.Key.Channel, &m.Key.User, &m.Member, &m.VersionSeq, &m.VersionUnixMs, &m.JoinSeq)
	return m, err
}

func (s *Store) members(ctx context.Context, sql string, args ...any) ([]channel.Membership, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, scanMember)
	return out, classify(err)
}

// Memberships returns a user's registers (left channels included), for
// all channels (at most MaxChannelsPerRead) or the listed ones, in channel
// order.
func (s *Store) Memberships(ctx context.Context, user string, channels []string) ([]channel.Membership, error) {
	if len(channels) == 0 {
		return s.members(ctx, `SELECT `+memberColumns+` FROM channel_members WHERE user_id = $1 ORDER BY channel_id LIMIT $2`, user, MaxChannelsPerRead)
	}
	return s.members(ctx, `SELECT `+memberColumns+` FROM channel_members WHERE user_id = $1 AND channel_id = ANY($2) ORDER BY channel_id`, user, channels)
}

// MembershipsAfter returns up to limit of a user's registers with a
// channel after the given one ("" first), in channel order: a whole user
// in bounded pages, however many channels.
func (s *Store) MembershipsAfter(ctx context.Context, user, after string, limit int) ([]channel.Membership, error) {
	return s.members(ctx, `SELECT `+memberColumns+` FROM channel_members WHERE user_id = $1 AND channel_id > $2 ORDER BY channel_id LIMIT $3`, user, after, limit)
}

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

// ChannelMembers returns up to limit registers of a channel with user ids
// after afterUser, in user order; membersOnly leaves out those who left.
func (s *Store) ChannelMembers(ctx context.Context, ch, afterUser string, limit int, membersOnly bool) ([]channel.Membership, error) {
	return s.members(ctx, `SELECT `+memberColumns+` FROM channel_members
		WHERE channel_id = $1 AND user_id > $2 AND (member OR NOT $4) ORDER BY user_id LIMIT $3`, ch, afterUser, limit, membersOnly)
}

// MemberCount returns how many users are members of a channel now.
func (s *Store) MemberCount(ctx context.Context, ch string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM channel_members WHERE channel_id = $1 AND member`, ch).Scan(&n)
	return n, classify(err)
}

// MembersPage returns up to limit registers with keys after the given one
// in (channel, user) order: the drift sweep's walk.
func (s *Store) MembersPage(ctx context.Context, after receipt.Key, limit int) ([]channel.Membership, error) {
	return s.members(ctx, `SELECT `+memberColumns+` FROM channel_members
		WHERE (channel_id, user_id) > ($1, $2) ORDER BY channel_id, user_id LIMIT $3`, after.Channel, after.User, limit)
}
