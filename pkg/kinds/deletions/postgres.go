package deletions

import (
	"context"
	_ "embed"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/thread"
)

// The deletions live in channel_deletions (sql/migrations), one row per
// (channel, root, seq): root 0 is the channel's messages, a root > 0 the
// thread's replies, a set named by a thread.Ref. Each set is kept within
// channel.DeletionWindow of its greatest seq; every statement applies
// the window itself (its $2), so a trim that lags changes no count.
var (
	//go:embed insert.sql
	insertSQL string
	//go:embed trim.sql
	trimSQL string
	//go:embed sets.sql
	setsSQL string
	//go:embed page.sql
	pageSQL string
	//go:embed counts.sql
	countsSQL string
	//go:embed mentions.sql
	mentionsSQL string
	//go:embed sizes.sql
	sizesSQL string
	//go:embed after.sql
	afterSQL string
	//go:embed digestspage.sql
	digestsPageSQL string
	//go:embed digests.sql
	digestsSQL string
)

// WritePG adds deleted seqs (a set union: an existing seq keeps its
// time) in one statement and returns how many rows were new.
func (s Store) WritePG(ctx context.Context, ds []channel.Deletions) (int64, error) {
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
	tag, err := s.pg.Pool().Exec(ctx, insertSQL, chs, seqs, times, roots)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

// refColumns splits sets' names into the channel and root arrays a
// statement unnests.
func refColumns(refs []thread.Ref) ([]string, []int64) {
	chs, roots := make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		chs[i], roots[i] = r.Channel, r.Root
	}
	return chs, roots
}

// TrimPG deletes, in one statement, the deletions of the listed sets
// below their window and returns how many rows went.
func (s Store) TrimPG(ctx context.Context, refs []thread.Ref) (int64, error) {
	if len(refs) == 0 {
		return 0, nil
	}
	sorted := slices.CompactFunc(slices.SortedFunc(slices.Values(refs), thread.Ref.Compare), func(a, b thread.Ref) bool { return a == b })
	chs, roots := refColumns(sorted)
	tag, err := s.pg.Pool().Exec(ctx, trimSQL, chs, channel.DeletionWindow, roots)
	if err != nil {
		return 0, pgstore.Classified(err)
	}
	return tag.RowsAffected(), nil
}

func (s Store) query(ctx context.Context, sql string, args ...any) ([]channel.Deletions, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, pgstore.Classified(err)
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
	return out, pgstore.Classified(err)
}

// ReadPG returns the deleted seqs (within the window, ascending) of the
// listed sets (a channel's messages, root 0, or a thread's replies) that
// have any, in (channel, root) order.
func (s Store) ReadPG(ctx context.Context, refs []thread.Ref) ([]channel.Deletions, error) {
	chs, roots := refColumns(refs)
	return s.query(ctx, setsSQL, chs, channel.DeletionWindow, roots)
}

// PagePG returns the deletions of up to limit sets after the given one,
// in (channel, root) order: the drift sweep's walk.
func (s Store) PagePG(ctx context.Context, after thread.Ref, limit int) ([]channel.Deletions, error) {
	return s.query(ctx, pageSQL, after.Channel, channel.DeletionWindow, limit, after.Root)
}

// CountPG answers queries from Postgres in two statements (the counts,
// then the deleted mentions), one answer per query in order, each Known.
func (s Store) CountPG(ctx context.Context, qs []Query) ([]Count, error) {
	out := make([]Count, len(qs))
	if len(qs) == 0 {
		return out, nil
	}
	chs, reads, heads, roots := make([]string, len(qs)), make([]int64, len(qs)), make([]int64, len(qs)), make([]int64, len(qs))
	var mch []string
	var mseq, midx, mroot []int64
	for i, q := range qs {
		chs[i], reads[i], heads[i], roots[i] = q.Ref.Channel, q.Read, q.Head, q.Ref.Root
		for _, m := range q.Mentions {
			mch, mseq, midx, mroot = append(mch, q.Ref.Channel), append(mseq, m), append(midx, int64(i)), append(mroot, q.Ref.Root)
		}
	}
	rows, err := s.pg.Pool().Query(ctx, countsSQL, chs, channel.DeletionWindow, reads, heads, roots)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	var i, n, first int64
	if _, err := pgx.ForEachRow(rows, []any{&i, &n, &first}, func() error {
		out[i-1].Known, out[i-1].Deleted, out[i-1].FirstKept = true, n, first
		return nil
	}); err != nil {
		return nil, pgstore.Classified(err)
	}
	if len(mseq) == 0 {
		return out, nil
	}
	rows, err = s.pg.Pool().Query(ctx, mentionsSQL, mch, channel.DeletionWindow, mseq, midx, mroot)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&i, &seq}, func() error {
		out[i].DeletedMentions = append(out[i].DeletedMentions, seq)
		return nil
	})
	return out, pgstore.Classified(err)
}

// SizesPG returns, per set of refs (in order), how many deleted seqs it
// holds within the window, counting no further than limit: what a reader
// needs to decide whether to copy a set whole, without reading it.
func (s Store) SizesPG(ctx context.Context, refs []thread.Ref, limit int) ([]int64, error) {
	out := make([]int64, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	chs, roots := refColumns(refs)
	rows, err := s.pg.Pool().Query(ctx, sizesSQL, chs, channel.DeletionWindow, limit, roots)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	var i, n int64
	_, err = pgx.ForEachRow(rows, []any{&i, &n}, func() error {
		out[i-1] = n
		return nil
	})
	return out, pgstore.Classified(err)
}

// SeqsAfterPG returns up to limit deleted seqs of one set above after
// (and within the window), ascending: a set copied in pages.
func (s Store) SeqsAfterPG(ctx context.Context, ref thread.Ref, after int64, limit int) ([]int64, error) {
	rows, err := s.pg.Pool().Query(ctx, afterSQL, ref.Channel, channel.DeletionWindow, after, ref.Root, limit)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return seqs, pgstore.Classified(err)
}

func (s Store) digests(ctx context.Context, sql string, args ...any) ([]thread.Ref, []channel.SetDigest, error) {
	rows, err := s.pg.Pool().Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, pgstore.Classified(err)
	}
	var refs []thread.Ref
	var ds []channel.SetDigest
	var ref thread.Ref
	var d channel.SetDigest
	_, err = pgx.ForEachRow(rows, []any{&ref.Channel, &ref.Root, &d.Count, &d.Least, &d.Greatest}, func() error {
		refs, ds = append(refs, ref), append(ds, d)
		return nil
	})
	return refs, ds, pgstore.Classified(err)
}

// DigestsPagePG returns the digests of up to limit sets after the given
// one, in (channel, root) order: the drift sweep's walk, which reads no
// set.
func (s Store) DigestsPagePG(ctx context.Context, after thread.Ref, limit int) ([]thread.Ref, []channel.SetDigest, error) {
	return s.digests(ctx, digestsPageSQL, after.Channel, channel.DeletionWindow, limit, after.Root)
}

// DigestsPG returns, per set of refs (in order), its digest (zero: no
// deletions).
func (s Store) DigestsPG(ctx context.Context, refs []thread.Ref) ([]channel.SetDigest, error) {
	out := make([]channel.SetDigest, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	chs, roots := refColumns(refs)
	got, ds, err := s.digests(ctx, digestsSQL, chs, channel.DeletionWindow, roots)
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
