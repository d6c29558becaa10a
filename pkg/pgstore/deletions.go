package pgstore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
)

// The deleted messages of migration 0012: a grow-only seq set per channel
// (channel.Deletions), kept within channel.DeletionWindow of its greatest
// seq. Readers apply the window themselves (windowFloor), so a trim that
// lags changes no count.

const insertDeletionsSQL = `
INSERT INTO channel_deletions (channel_id, seq, deleted_at)
SELECT c, s, to_timestamp(ts / 1000.0) FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS x(c, s, ts)
ORDER BY c, s
ON CONFLICT DO NOTHING`

// InsertDeletions adds deleted seqs (a set union: an existing seq keeps
// its time) in one statement and returns how many rows were new.
func (s *Store) InsertDeletions(ctx context.Context, ds []channel.Deletions) (int64, error) {
	var chs []string
	var seqs, times []int64
	now := time.Now().UnixMilli()
	for _, d := range ds {
		ts := d.UpdatedAtUnixMs
		if ts <= 0 {
			ts = now
		}
		for _, q := range d.Seqs {
			chs, seqs, times = append(chs, d.Channel), append(seqs, q), append(times, ts)
		}
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, insertDeletionsSQL, chs, seqs, times)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}

// windowFloor is, for the channel of alias t, the greatest seq the window
// drops (deletions at or below it never count).
const windowFloor = `(SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = %s)`

func floorOf(col string) string { return strings.Replace(windowFloor, "%s", col, 1) }

// TrimDeletions deletes, in one statement, the deletions of the listed
// channels below their window (an index range per channel) and returns
// how many rows went.
func (s *Store) TrimDeletions(ctx context.Context, channels []string) (int64, error) {
	if len(channels) == 0 {
		return 0, nil
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(channels)))
	tag, err := s.pool.Exec(ctx, `DELETE FROM channel_deletions d USING unnest($1::text[]) AS k(c)
		WHERE d.channel_id = k.c AND d.seq <= `+floorOf("k.c"), sorted, channel.DeletionWindow)
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
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&ch, &seq}, func() error {
		if n := len(out); n == 0 || out[n-1].Channel != ch {
			out = append(out, channel.Deletions{Channel: ch})
		}
		out[len(out)-1].Seqs = append(out[len(out)-1].Seqs, seq)
		return nil
	})
	return out, classify(err)
}

// Deletions returns the deleted seqs (within the window, ascending) of
// the listed channels that have any, in channel order.
func (s *Store) Deletions(ctx context.Context, channels []string) ([]channel.Deletions, error) {
	return s.deletions(ctx, `SELECT d.channel_id, d.seq FROM channel_deletions d
		WHERE d.channel_id = ANY($1) AND d.seq > `+floorOf("d.channel_id")+` ORDER BY 1, 2`, channels, channel.DeletionWindow)
}

// DeletionsPage returns the deletions of up to limit channels after the
// given one, in channel order: the drift sweep's walk.
func (s *Store) DeletionsPage(ctx context.Context, after string, limit int) ([]channel.Deletions, error) {
	return s.deletions(ctx, `SELECT d.channel_id, d.seq FROM (
		SELECT DISTINCT channel_id FROM channel_deletions WHERE channel_id > $1 ORDER BY channel_id LIMIT $3) k
		JOIN channel_deletions d ON d.channel_id = k.channel_id
		WHERE d.seq > `+floorOf("k.channel_id")+` ORDER BY 1, 2`, after, channel.DeletionWindow, limit)
}

// DeletionQuery asks how deletions change a user's counts in a channel:
// the effective read seq, the head, and the kept mention seqs above the
// read.
type DeletionQuery struct {
	Channel    string
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

// deletionCountsSQL counts, per query, the deletions in (read, head] and
// finds the first kept seq: read+1 unless deleted, else one past the end
// of the run of deletions starting there (the least deleted seq above the
// read whose successor is not deleted: an index walk of the run).
const deletionCountsSQL = `
SELECT q.i,
  (SELECT count(*) FROM channel_deletions d WHERE d.channel_id = q.c AND d.seq > greatest(q.r, f.floor) AND d.seq <= q.h),
  CASE WHEN NOT EXISTS (SELECT 1 FROM channel_deletions d WHERE d.channel_id = q.c AND d.seq = q.r + 1 AND d.seq > f.floor) THEN q.r + 1
  ELSE (SELECT min(d.seq) + 1 FROM channel_deletions d WHERE d.channel_id = q.c AND d.seq > q.r
        AND NOT EXISTS (SELECT 1 FROM channel_deletions e WHERE e.channel_id = q.c AND e.seq = d.seq + 1)) END
FROM unnest($1::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS q(c, r, h, i)
CROSS JOIN LATERAL (SELECT ` + windowFloor + ` AS floor) f`

// DeletionCounts answers queries in two statements (the counts, then the
// deleted mentions), one answer per query in order.
func (s *Store) DeletionCounts(ctx context.Context, qs []DeletionQuery) ([]DeletionCount, error) {
	out := make([]DeletionCount, len(qs))
	if len(qs) == 0 {
		return out, nil
	}
	chs, reads, heads := make([]string, len(qs)), make([]int64, len(qs)), make([]int64, len(qs))
	var mch []string
	var mseq, midx []int64
	for i, q := range qs {
		chs[i], reads[i], heads[i] = q.Channel, q.Read, q.Head
		for _, m := range q.Mentions {
			mch, mseq, midx = append(mch, q.Channel), append(mseq, m), append(midx, int64(i))
		}
	}
	rows, err := s.pool.Query(ctx, strings.Replace(deletionCountsSQL, "%s", "q.c", 1), chs, channel.DeletionWindow, reads, heads)
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
	rows, err = s.pool.Query(ctx, `SELECT m.i, m.s FROM unnest($1::text[], $3::bigint[], $4::bigint[]) AS m(c, s, i)
		WHERE EXISTS (SELECT 1 FROM channel_deletions d WHERE d.channel_id = m.c AND d.seq = m.s AND d.seq > `+floorOf("m.c")+`)
		ORDER BY 1, 2`, mch, channel.DeletionWindow, mseq, midx)
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
