package pgstore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/thread"
)

// The deleted messages of migration 0012: a grow-only seq set per channel
// (channel.Deletions), kept within channel.DeletionWindow of its greatest
// seq. Readers apply the window themselves (windowFloor), so a trim that
// lags changes no count. Migration 0014 keys each set by (channel, root):
// root 0 is the channel's messages, a root > 0 the thread's replies; a
// set is named by a thread.Ref.

const insertDeletionsSQL = `
INSERT INTO channel_deletions (channel_id, root_seq, seq, deleted_at)
SELECT c, r, s, to_timestamp(ts / 1000.0) FROM unnest($1::text[], $4::bigint[], $2::bigint[], $3::bigint[]) AS x(c, r, s, ts)
ORDER BY c, r, s
ON CONFLICT DO NOTHING`

// InsertDeletions adds deleted seqs (a set union: an existing seq keeps
// its time) in one statement and returns how many rows were new.
func (s *Store) InsertDeletions(ctx context.Context, ds []channel.Deletions) (int64, error) {
	var chs []string
	var seqs, times, roots []int64
	now := time.Now().UnixMilli()
	for _, d := range ds {
		ts := d.UpdatedAtUnixMs
		if ts <= 0 {
			ts = now
		}
		for _, q := range d.Seqs {
			chs, seqs, times, roots = append(chs, d.Channel), append(seqs, q), append(times, ts), append(roots, d.Root)
		}
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, insertDeletionsSQL, chs, seqs, times, roots)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

// windowFloor is, for the set of channel %s and root %r, the greatest seq
// the window drops (deletions at or below it never count).
const windowFloor = `(SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = %s AND x.root_seq = %r)`

func floorOf(ch, root string) string {
	return strings.Replace(strings.Replace(windowFloor, "%s", ch, 1), "%r", root, 1)
}

// refColumns splits deletion sets' names into the channel and root
// arrays a statement unnests.
func refColumns(refs []thread.Ref) ([]string, []int64) {
	chs, roots := make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		chs[i], roots[i] = r.Channel, r.Root
	}
	return chs, roots
}

// TrimDeletions deletes, in one statement, the deletions of the listed
// sets below their window (an index range per set) and returns how many
// rows went.
func (s *Store) TrimDeletions(ctx context.Context, refs []thread.Ref) (int64, error) {
	if len(refs) == 0 {
		return 0, nil
	}
	sorted := slices.CompactFunc(slices.SortedFunc(slices.Values(refs), thread.Ref.Compare), func(a, b thread.Ref) bool { return a == b })
	chs, roots := refColumns(sorted)
	tag, err := s.pool.Exec(ctx, `DELETE FROM channel_deletions d USING unnest($1::text[], $3::bigint[]) AS k(c, r)
		WHERE d.channel_id = k.c AND d.root_seq = k.r AND d.seq <= `+floorOf("k.c", "k.r"), chs, channel.DeletionWindow, roots)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

func (s *Store) deletions(ctx context.Context, sql string, args ...any) ([]channel.Deletions, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	var out []channel.Deletions
	var ch string
	var root, seq int64
	_, err = pgx.ForEachRow(rows, []any{&ch, &root, &seq}, func() error {
		if n := len(out); n == 0 || out[n-1].Channel != ch || out[n-1].Root != root {
			out = append(out, channel.Deletions{Channel: ch, Root: root})
		}
		out[len(out)-1].Seqs = append(out[len(out)-1].Seqs, seq)
		return nil
	})
	return out, classify(err)
}

// Deletions returns the deleted seqs (within the window, ascending) of
// the listed channels' messages (root 0) where they have any, in channel
// order.
func (s *Store) Deletions(ctx context.Context, channels []string) ([]channel.Deletions, error) {
	refs := make([]thread.Ref, len(channels))
	for i, ch := range channels {
		refs[i].Channel = ch
	}
	return s.DeletionSets(ctx, refs)
}

// DeletionSets returns the deleted seqs (within the window, ascending) of
// the listed sets (a channel's messages, root 0, or a thread's replies)
// that have any, in (channel, root) order.
func (s *Store) DeletionSets(ctx context.Context, refs []thread.Ref) ([]channel.Deletions, error) {
	chs, roots := refColumns(refs)
	return s.deletions(ctx, `SELECT d.channel_id, d.root_seq, d.seq FROM unnest($1::text[], $3::bigint[]) AS k(c, r)
		JOIN channel_deletions d ON d.channel_id = k.c AND d.root_seq = k.r
		WHERE d.seq > `+floorOf("k.c", "k.r")+` GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, chs, channel.DeletionWindow, roots)
}

// DeletionsPage returns the deletions of up to limit sets after the given
// one, in (channel, root) order: the drift sweep's walk.
func (s *Store) DeletionsPage(ctx context.Context, after thread.Ref, limit int) ([]channel.Deletions, error) {
	return s.deletions(ctx, `SELECT d.channel_id, d.root_seq, d.seq FROM (
		SELECT DISTINCT channel_id, root_seq FROM channel_deletions WHERE (channel_id, root_seq) > ($1, $4)
		ORDER BY channel_id, root_seq LIMIT $3) k
		JOIN channel_deletions d ON d.channel_id = k.channel_id AND d.root_seq = k.root_seq
		WHERE d.seq > `+floorOf("k.channel_id", "k.root_seq")+` ORDER BY 1, 2, 3`, after.Channel, channel.DeletionWindow, limit, after.Root)
}

// DeletionQuery asks how deletions change a user's counts in a channel
// (Root 0) or a thread: the effective read seq, the head, and the kept
// mention seqs above the read.
type DeletionQuery struct {
	Channel    string
	Root       int64
	Read, Head int64
	Mentions   []int64
}

// DeletionCount answers a DeletionQuery: the deleted seqs in (read,
// head], the first seq above the read that is not deleted, and the
// mentions that are deleted.
type DeletionCount struct {
	Deleted, FirstKept int64
	DeletedMentions    []int64
}

// deletionCountsSQL counts, per query, the deletions in (read, head]
// and finds the first kept seq, in one ordered pass over them: the k-th
// deletion above the read is read+k exactly while the run of deletions
// starting at read+1 lasts (seqs are distinct), so the run's length is
// how many rows have seq = read + row_number, and the first kept seq is
// one past it. Linear in the deletions counted whatever the planner
// knows (a self anti-join to find the run's end was quadratic on a table
// without statistics: minutes for a run of 30,000).
const deletionCountsSQL = `
SELECT q.i, x.n, q.r + 1 + x.run
FROM unnest($1::text[], $3::bigint[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS q(c, r, h, t, i)
CROSS JOIN LATERAL (SELECT ` + windowFloor + ` AS floor) f
CROSS JOIN LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE y.seq = q.r + y.rn) AS run FROM (
  SELECT d.seq, row_number() OVER (ORDER BY d.seq) AS rn FROM channel_deletions d
  WHERE d.channel_id = q.c AND d.root_seq = q.t AND d.seq > greatest(q.r, f.floor) AND d.seq <= q.h) y) x`

// DeletionCounts answers queries in two statements (the counts, then the
// deleted mentions), one answer per query in order.
func (s *Store) DeletionCounts(ctx context.Context, qs []DeletionQuery) ([]DeletionCount, error) {
	out := make([]DeletionCount, len(qs))
	if len(qs) == 0 {
		return out, nil
	}
	chs, reads, heads, roots := make([]string, len(qs)), make([]int64, len(qs)), make([]int64, len(qs)), make([]int64, len(qs))
	var mch []string
	var mseq, midx, mroot []int64
	for i, q := range qs {
		chs[i], reads[i], heads[i], roots[i] = q.Channel, q.Read, q.Head, q.Root
		for _, m := range q.Mentions {
			mch, mseq, midx, mroot = append(mch, q.Channel), append(mseq, m), append(midx, int64(i)), append(mroot, q.Root)
		}
	}
	countsSQL := strings.Replace(strings.Replace(deletionCountsSQL, "%s", "q.c", 1), "%r", "q.t", 1)
	rows, err := s.pool.Query(ctx, countsSQL, chs, channel.DeletionWindow, reads, heads, roots)
	if err != nil {
		return nil, classify(err)
	}
	var i, n, first int64
	if _, err := pgx.ForEachRow(rows, []any{&i, &n, &first}, func() error {
		out[i-1].Deleted, out[i-1].FirstKept = n, first
		return nil
	}); err != nil {
		return nil, classify(err)
	}
	if len(mseq) == 0 {
		return out, nil
	}
	rows, err = s.pool.Query(ctx, `SELECT m.i, m.s FROM unnest($1::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS m(c, s, i, t)
		WHERE EXISTS (SELECT 1 FROM channel_deletions d WHERE d.channel_id = m.c AND d.root_seq = m.t AND d.seq = m.s AND d.seq > `+floorOf("m.c", "m.t")+`)
		ORDER BY 1, 2`, mch, channel.DeletionWindow, mseq, midx, mroot)
	if err != nil {
		return nil, classify(err)
	}
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&i, &seq}, func() error {
		out[i].DeletedMentions = append(out[i].DeletedMentions, seq)
		return nil
	})
	return out, classify(err)
}

// DeletionSetSizes returns, per set of refs (in order), how many deleted
// seqs it holds within the window, counting no further than limit: what a
// reader needs to decide whether to copy a set whole, without reading it.
func (s *Store) DeletionSetSizes(ctx context.Context, refs []thread.Ref, limit int) ([]int64, error) {
	out := make([]int64, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	chs, roots := refColumns(refs)
	rows, err := s.pool.Query(ctx, `SELECT k.i, (SELECT count(*) FROM (SELECT 1 FROM channel_deletions d
		WHERE d.channel_id = k.c AND d.root_seq = k.r AND d.seq > `+floorOf("k.c", "k.r")+` LIMIT $3) x)
		FROM unnest($1::text[], $4::bigint[]) WITH ORDINALITY AS k(c, r, i)`, chs, channel.DeletionWindow, limit, roots)
	if err != nil {
		return nil, classify(err)
	}
	var i, n int64
	_, err = pgx.ForEachRow(rows, []any{&i, &n}, func() error {
		out[i-1] = n
		return nil
	})
	return out, classify(err)
}

// DeletionSeqsAfter returns up to limit deleted seqs of one set above
// after (and within the window), ascending: a set copied in pages.
func (s *Store) DeletionSeqsAfter(ctx context.Context, ref thread.Ref, after int64, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT d.seq FROM channel_deletions d
		WHERE d.channel_id = $1 AND d.root_seq = $4 AND d.seq > greatest($3, `+floorOf("$1", "$4")+`)
		ORDER BY d.seq LIMIT $5`, ref.Channel, channel.DeletionWindow, after, ref.Root, limit)
	if err != nil {
		return nil, classify(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return seqs, classify(err)
}

// deletionDigest is the digest columns of the set k.c, k.r whose
// greatest seq is k.top: the count and least seq within its window.
const deletionDigest = `CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(min(d.seq), 0) AS least FROM channel_deletions d
	WHERE d.channel_id = k.c AND d.root_seq = k.r AND d.seq > k.top - $2) s`

func (s *Store) digests(ctx context.Context, sql string, args ...any) ([]thread.Ref, []channel.SetDigest, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, classify(err)
	}
	var refs []thread.Ref
	var ds []channel.SetDigest
	var ref thread.Ref
	var d channel.SetDigest
	_, err = pgx.ForEachRow(rows, []any{&ref.Channel, &ref.Root, &d.Count, &d.Least, &d.Greatest}, func() error {
		refs, ds = append(refs, ref), append(ds, d)
		return nil
	})
	return refs, ds, classify(err)
}

// DeletionDigestsPage returns the digests of up to limit sets after the
// given one, in (channel, root) order: the drift sweep's walk, which
// reads no set.
func (s *Store) DeletionDigestsPage(ctx context.Context, after thread.Ref, limit int) ([]thread.Ref, []channel.SetDigest, error) {
	return s.digests(ctx, `SELECT k.c, k.r, s.n, s.least, k.top FROM (
		SELECT channel_id AS c, root_seq AS r, max(seq) AS top FROM channel_deletions
		WHERE (channel_id, root_seq) > ($1, $4) GROUP BY 1, 2 ORDER BY 1, 2 LIMIT $3) k
		`+deletionDigest+` ORDER BY 1, 2`, after.Channel, channel.DeletionWindow, limit, after.Root)
}

// DeletionDigests returns, per set of refs (in order), its digest (zero:
// no deletions).
func (s *Store) DeletionDigests(ctx context.Context, refs []thread.Ref) ([]channel.SetDigest, error) {
	out := make([]channel.SetDigest, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	chs, roots := refColumns(refs)
	got, ds, err := s.digests(ctx, `SELECT k.c, k.r, s.n, s.least, k.top FROM (
		SELECT q.c, q.r, (SELECT max(x.seq) FROM channel_deletions x WHERE x.channel_id = q.c AND x.root_seq = q.r) AS top
		FROM unnest($1::text[], $3::bigint[]) AS q(c, r)) k
		`+deletionDigest+` WHERE k.top IS NOT NULL`, chs, channel.DeletionWindow, roots)
	if err != nil {
		return nil, err
	}
	at := make(map[thread.Ref]channel.SetDigest, len(got))
	for i, r := range got {
		at[r] = ds[i]
	}
	for i, r := range refs {
		out[i] = at[r]
	}
	return out, nil
}
