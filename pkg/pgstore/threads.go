package pgstore

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/thread"
)

// The tables of migration 0010: thread heads (a max-register, like
// channel_heads) and thread states (one row per (user, thread) holding
// thread.State). Each write is one statement per call from parameter
// arrays, rows in key order, merging by pkg/thread's rules, so duplicates,
// reordering and replays are harmless; callers dedupe per key first (ON
// CONFLICT cannot touch a row twice in one statement).

// upsertThreadHeadsSQL is thread.MergeHead: the greater seq wins with its
// message id, and the time is the greater of the two whichever seq wins.
const upsertThreadHeadsSQL = `
INSERT INTO thread_heads AS t (channel_id, root_seq, head_seq, head_message_id, updated_ms)
SELECT c, r, s, m, ts
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[]) AS x(c, r, s, m, ts)
ON CONFLICT (channel_id, root_seq) DO UPDATE SET
    head_seq        = CASE WHEN excluded.head_seq > t.head_seq THEN excluded.head_seq ELSE t.head_seq END,
    head_message_id = CASE WHEN excluded.head_seq > t.head_seq THEN excluded.head_message_id ELSE t.head_message_id END,
    updated_ms      = GREATEST(t.updated_ms, excluded.updated_ms)
WHERE excluded.head_seq > t.head_seq OR excluded.updated_ms > t.updated_ms`

// UpsertThreadHeads max-merges heads into thread_heads in one statement
// and returns how many rows changed. Heads must be unique per thread.
func (s *Store) UpsertThreadHeads(ctx context.Context, heads []thread.Head) (int64, error) {
	if len(heads) == 0 {
		return 0, nil
	}
	sorted := slices.Clone(heads)
	slices.SortFunc(sorted, func(a, b thread.Head) int { return a.Ref.Compare(b.Ref) })
	n := len(sorted)
	chs, roots, seqs, msgs, times := make([]string, n), make([]int64, n), make([]int64, n), make([]string, n), make([]int64, n)
	for i, h := range sorted {
		chs[i], roots[i], seqs[i], msgs[i], times[i] = h.Channel, h.Root, h.Seq, h.MessageID, h.UpdatedAtUnixMs
	}
	tag, err := s.pool.Exec(ctx, upsertThreadHeadsSQL, chs, roots, seqs, msgs, times)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

const threadHeadColumns = `channel_id, root_seq, head_seq, head_message_id, updated_ms`

func scanThreadHead(row pgx.CollectableRow) (thread.Head, error) {
	var h thread.Head
	err := row.Scan(&h.Channel, &h.Root, &h.Seq, &h.MessageID, &h.UpdatedAtUnixMs)
	return h, err
}

func (s *Store) threadHeads(ctx context.Context, sql string, args ...any) ([]thread.Head, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, scanThreadHead)
	return out, classify(err)
}

// ThreadHeads returns the heads of the listed threads that have one, in
// thread order.
func (s *Store) ThreadHeads(ctx context.Context, refs []thread.Ref) ([]thread.Head, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	chs, roots := make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		chs[i], roots[i] = r.Channel, r.Root
	}
	return s.threadHeads(ctx, `SELECT `+threadHeadColumns+` FROM thread_heads t
		JOIN (SELECT DISTINCT c, r FROM unnest($1::text[], $2::bigint[]) AS k(c, r)) k ON t.channel_id = k.c AND t.root_seq = k.r
		ORDER BY channel_id, root_seq`, chs, roots)
}

// ThreadHeadsPage returns up to limit heads in thread order, after the
// given thread when hasAfter: the drift sweep's walk.
func (s *Store) ThreadHeadsPage(ctx context.Context, after thread.Ref, hasAfter bool, limit int) ([]thread.Head, error) {
	if !hasAfter {
		return s.threadHeads(ctx, `SELECT `+threadHeadColumns+` FROM thread_heads ORDER BY channel_id, root_seq LIMIT $1`, limit)
	}
	return s.threadHeads(ctx, `SELECT `+threadHeadColumns+` FROM thread_heads
		WHERE (channel_id, root_seq) > ($1, $2) ORDER BY channel_id, root_seq LIMIT $3`, after.Channel, after.Root, limit)
}

// threadCursorsMovedSQL says whether the incoming row moves the stored
// thread cursors, as receipt.Merge's moved: the reads as readMovedSQL, or
// the delivered cursor advances.
const threadCursorsMovedSQL = `(` + readMovedSQL + `
    OR (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq))`

// threadMentionsMergedSQL is channel.MergeMentions of the stored and the
// incoming seqs: the union, distinct, kept to the newest $17+1, ascending.
const threadMentionsMergedSQL = `ARRAY(SELECT m FROM (
    SELECT DISTINCT m FROM unnest(t.mention_seqs || excluded.mention_seqs) AS u(m) ORDER BY m DESC LIMIT $17 + 1) k
    ORDER BY m)`

// upsertThreadStatesSQL merges as thread.Merge. The cursors follow
// mergeSetSQL (readSetSQL) (delivered needs no raise to the read seq: every row written
// already satisfies it, see UpsertThreadStates), except that the device
// and time move only with a cursor, since a row also changes for a follow
// or a mention alone. The follow register takes the greater (version,
// following), false < true as thread.Follow.Compare. The WHERE skips rows
// where nothing changes, which avoids a dead tuple per duplicate.
const upsertThreadStatesSQL = `
INSERT INTO thread_states AS t (user_id, channel_id, root_seq,
    read_epoch, read_seq, read_message_id, delivered_epoch, delivered_seq, delivered_message_id,
    private_read_epoch, private_read_seq, device_id, updated_ms, follow_version_ms, following, mention_seqs)
SELECT u, c, r, re, rs, rm, de, ds, dm, pe, ps, dev, ts, fv, fl, ms::bigint[]
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[],
            $7::bigint[], $8::bigint[], $9::text[], $10::bigint[], $11::bigint[], $12::text[],
            $13::bigint[], $14::bigint[], $15::boolean[], $16::text[])
     AS x(u, c, r, re, rs, rm, de, ds, dm, pe, ps, dev, ts, fv, fl, ms)
ON CONFLICT (user_id, channel_id, root_seq) DO UPDATE SET` + readSetSQL + `
    delivered_epoch      = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_epoch ELSE t.delivered_epoch END,
    delivered_seq        = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_seq ELSE t.delivered_seq END,
    delivered_message_id = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_message_id ELSE t.delivered_message_id END,
    device_id  = CASE WHEN ` + threadCursorsMovedSQL + ` THEN excluded.device_id ELSE t.device_id END,
    updated_ms = CASE WHEN ` + threadCursorsMovedSQL + ` THEN GREATEST(t.updated_ms, excluded.updated_ms) ELSE t.updated_ms END,
    follow_version_ms = CASE WHEN (excluded.follow_version_ms, excluded.following) > (t.follow_version_ms, t.following) THEN excluded.follow_version_ms ELSE t.follow_version_ms END,
    following         = CASE WHEN (excluded.follow_version_ms, excluded.following) > (t.follow_version_ms, t.following) THEN excluded.following ELSE t.following END,
    mention_seqs = ` + threadMentionsMergedSQL + `
WHERE ` + threadCursorsMovedSQL + `
   OR (excluded.follow_version_ms, excluded.following) > (t.follow_version_ms, t.following)
   OR ` + threadMentionsMergedSQL + ` <> t.mention_seqs`

// compareThreadStates orders states by key, the order rows are written in.
func compareThreadStates(a, b thread.State) int { return a.Key.Compare(b.Key) }

// UpsertThreadStates merges states into thread_states in one statement, as
// thread.Merge with mentionCap (channel.MentionCapDefault when not
// positive), and returns how many rows changed (inserted or moved). States
// must be unique per key; they are written in key order. Each is first
// merged into the empty register, as a store receiving it would: that
// raises delivered to the read seq, drops a private read that is not
// ahead, keeps the newest mentions, and leaves the device and time of a
// register without cursors empty; the conflict clause relies on it.
func (s *Store) UpsertThreadStates(ctx context.Context, states []thread.State, mentionCap int) (int64, error) {
	if len(states) == 0 {
		return 0, nil
	}
	if mentionCap <= 0 {
		mentionCap = channel.MentionCapDefault
	}
	tag, err := s.pool.Exec(ctx, upsertThreadStatesSQL, upsertThreadArgs(sortedThreadStates(states), mentionCap)...)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

func sortedThreadStates(states []thread.State) []thread.State {
	if slices.IsSortedFunc(states, compareThreadStates) {
		return states
	}
	sorted := slices.Clone(states)
	slices.SortFunc(sorted, compareThreadStates)
	return sorted
}

// upsertThreadArgs are upsertThreadStatesSQL's parameters for sorted
// states, each first merged into the empty register (UpsertThreadStates).
func upsertThreadArgs(sorted []thread.State, mentionCap int) []any {
	n := len(sorted)
	users, chs, devs, rms, dms, mss := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	roots, res, rss, des, dss, pes, pss := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	times, fvs, fls := make([]int64, n), make([]int64, n), make([]bool, n)
	for i := range sorted {
		st, _ := thread.Merge(thread.State{}, sorted[i], mentionCap)
		c := st.Cursors
		users[i], chs[i], roots[i] = st.Key.User, st.Key.Channel, st.Key.Root
		res[i], rss[i], rms[i] = c.Read.Position.Epoch, c.Read.Position.Seq, c.Read.MessageID
		des[i], dss[i], dms[i] = c.Delivered.Position.Epoch, c.Delivered.Position.Seq, c.Delivered.MessageID
		pes[i], pss[i] = c.PrivateRead.Position.Epoch, c.PrivateRead.Position.Seq
		devs[i], times[i] = c.DeviceID, c.UpdatedAtUnixMs
		fvs[i], fls[i] = st.Follow.VersionUnixMs, st.Follow.Following
		mss[i] = int64ArrayLiteral(st.Mentions)
	}
	return []any{users, chs, roots, res, rss, rms, des, dss, dms, pes, pss, devs, times, fvs, fls, mss, mentionCap}
}

// int64ArrayLiteral is seqs as a Postgres array literal: unnest cannot
// take an array of arrays of different lengths, so each row's mentions
// travel as text and are cast back in the statement.
func int64ArrayLiteral(seqs []int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, q := range seqs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(q, 10))
	}
	b.WriteByte('}')
	return b.String()
}

const threadStateColumns = `user_id, channel_id, root_seq,
    read_epoch, read_seq, read_message_id, delivered_epoch, delivered_seq, delivered_message_id,
    private_read_epoch, private_read_seq, device_id, updated_ms, follow_version_ms, following, mention_seqs`

const threadStateOrder = ` ORDER BY user_id, channel_id, root_seq`

func scanThreadState(row pgx.CollectableRow) (thread.State, error) {
	var st thread.State
	c := &st.Cursors
	err := row.Scan(&st.Key.User, &st.Key.Channel, &st.Key.Root,
		&c.Read.Position.Epoch, &c.Read.Position.Seq, &c.Read.MessageID,
		&c.Delivered.Position.Epoch, &c.Delivered.Position.Seq, &c.Delivered.MessageID,
		&c.PrivateRead.Position.Epoch, &c.PrivateRead.Position.Seq, &c.DeviceID, &c.UpdatedAtUnixMs,
		&st.Follow.VersionUnixMs, &st.Follow.Following, &st.Mentions)
	// The column keeps the greatest private position merged; the state
	// holds it only while it is ahead of the read cursor.
	st.Cursors = st.Cursors.Canonical()
	if len(st.Mentions) == 0 {
		st.Mentions = nil // as thread.Merge leaves an empty set
	}
	return st, err
}

func (s *Store) threadStates(ctx context.Context, sql string, args ...any) ([]thread.State, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, scanThreadState)
	return out, classify(err)
}

// ThreadStates returns the states of the keys that have one (any users),
// in key order.
func (s *Store) ThreadStates(ctx context.Context, keys []thread.Key) ([]thread.State, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	users, chs, roots := make([]string, len(keys)), make([]string, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		users[i], chs[i], roots[i] = k.User, k.Channel, k.Root
	}
	return s.threadStates(ctx, `SELECT `+threadStateColumns+` FROM thread_states t
		JOIN (SELECT DISTINCT u, c, r FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(u, c, r)) k
		ON t.user_id = k.u AND t.channel_id = k.c AND t.root_seq = k.r`+threadStateOrder, users, chs, roots)
}

// UserThreadStates returns up to limit of a user's states, in one channel
// or all of them (channel ""), in key order.
func (s *Store) UserThreadStates(ctx context.Context, user, channel string, limit int) ([]thread.State, error) {
	if channel == "" {
		return s.threadStates(ctx, `SELECT `+threadStateColumns+` FROM thread_states
			WHERE user_id = $1`+threadStateOrder+` LIMIT $2`, user, limit)
	}
	return s.threadStates(ctx, `SELECT `+threadStateColumns+` FROM thread_states
		WHERE user_id = $1 AND channel_id = $2`+threadStateOrder+` LIMIT $3`, user, channel, limit)
}

// RecentThreadStates returns up to limit of a user's followed registers,
// the most recently active first (a restore of a user with more
// registers than Redis keeps).
func (s *Store) RecentThreadStates(ctx context.Context, user string, limit int) ([]thread.State, error) {
	return s.threadStates(ctx, `SELECT `+threadStateColumns+` FROM thread_states
		WHERE user_id = $1 AND following ORDER BY greatest(updated_ms, follow_version_ms) DESC LIMIT $2`, user, limit)
}

// ThreadStatesPage returns up to limit states in key order, after the
// given key when hasAfter: the drift sweep's walk.
func (s *Store) ThreadStatesPage(ctx context.Context, after thread.Key, hasAfter bool, limit int) ([]thread.State, error) {
	if !hasAfter {
		return s.threadStates(ctx, `SELECT `+threadStateColumns+` FROM thread_states`+threadStateOrder+` LIMIT $1`, limit)
	}
	return s.threadStates(ctx, `SELECT `+threadStateColumns+` FROM thread_states
		WHERE (user_id, channel_id, root_seq) > ($1, $2, $3)`+threadStateOrder+` LIMIT $4`,
		after.User, after.Channel, after.Root, limit)
}

// ThreadMemberStates returns the states of the listed users in one thread
// (those that have one), in user order.
func (s *Store) ThreadMemberStates(ctx context.Context, ref thread.Ref, users []string) ([]thread.State, error) {
	if len(users) == 0 {
		return nil, nil
	}
	return s.threadStates(ctx, `SELECT `+threadStateColumns+` FROM thread_states
		WHERE user_id = ANY($1) AND channel_id = $2 AND root_seq = $3`+threadStateOrder, users, ref.Channel, ref.Root)
}
