package deletions

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// channelRefs names the channels' sets (root 0).
func channelRefs(chs ...string) []thread.Ref {
	refs := make([]thread.Ref, len(chs))
	for i, ch := range chs {
		refs[i].Channel = ch
	}
	return refs
}

// Postgres's deletions are the union of the writes, within the window,
// and its counts are the rule's (channel.UnreadDeleted,
// channel.MentionCountDeleted) for random sets, reads and heads.
func TestDeletionsCountAsTheRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewStore(pgtest.NewSchema(t).Store, nil)
	rng := rand.New(rand.NewPCG(9, 9))
	var qs []Query
	var want [][3]int64
	var wantMentions [][]int64
	for trial := range 40 {
		ch := "c" + strconv.Itoa(trial)
		var all []int64
		for range 1 + rng.IntN(4) {
			var seqs []int64
			for range 1 + rng.IntN(10) {
				seqs = append(seqs, 1+rng.Int64N(30))
			}
			seqs = slices.Compact(slices.Sorted(slices.Values(seqs)))
			all = channel.MergeDeletions(all, seqs)
			_, err := s.WritePG(ctx, []channel.Deletions{{Channel: ch, Seqs: seqs, UpdatedAtUnixMs: 1000}})
			require.NoError(t, err)
		}
		got, err := s.ReadPG(ctx, channelRefs(ch))
		require.NoError(t, err)
		require.Equal(t, []channel.Deletions{{Channel: ch, Seqs: all}}, got)

		read, head := rng.Int64N(30), 1+rng.Int64N(32)
		if head <= read {
			continue
		}
		mentions := []int64{}
		for s := read + 1; s <= head; s += 1 + rng.Int64N(4) {
			mentions = append(mentions, s)
		}
		st := receipt.State{Read: receipt.Cursor{Position: receipt.Position{Seq: read}}}
		n, first := channel.UnreadDeleted(head, st, all)
		m, _ := channel.MentionCountDeleted(mentions, read, 100, all)
		qs = append(qs, Query{Ref: thread.Ref{Channel: ch}, Read: read, Head: head, Mentions: mentions})
		want = append(want, [3]int64{n, first, m})
		wantMentions = append(wantMentions, mentions)
	}
	got, err := s.CountPG(ctx, qs)
	require.NoError(t, err)
	require.Len(t, got, len(qs))
	for i, q := range qs {
		n, first := channel.AfterDeletions(q.Head-q.Read, got[i].FirstKept, got[i].Deleted)
		m, _ := channel.MentionCountDeleted(wantMentions[i], q.Read, 100, got[i].DeletedMentions)
		require.Equal(t, want[i], [3]int64{n, first, m}, "query %+v: %+v", q, got[i])
	}
}

// The window: a deletion more than channel.DeletionWindow below the
// greatest is neither read nor counted, and the trim removes it.
func TestDeletionsWindowAndTrim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewStore(pgtest.NewSchema(t).Store, nil)
	w := int64(channel.DeletionWindow)
	_, err := s.WritePG(ctx, []channel.Deletions{{Channel: "c", Seqs: []int64{2, 3}}, {Channel: "d", Seqs: []int64{2}}})
	require.NoError(t, err)
	_, err = s.WritePG(ctx, []channel.Deletions{{Channel: "c", Seqs: []int64{w + 2}}})
	require.NoError(t, err)
	got, err := s.ReadPG(ctx, channelRefs("c", "d"))
	require.NoError(t, err)
	require.Equal(t, []channel.Deletions{{Channel: "c", Seqs: []int64{3, w + 2}}, {Channel: "d", Seqs: []int64{2}}}, got)
	page, err := s.PagePG(ctx, thread.Ref{}, 1)
	require.NoError(t, err)
	require.Equal(t, got[:1], page)
	page, err = s.PagePG(ctx, thread.Ref{Channel: "c"}, 10)
	require.NoError(t, err)
	require.Equal(t, got[1:], page)

	counts, err := s.CountPG(ctx, []Query{{Ref: thread.Ref{Channel: "c"}, Read: 1, Head: w + 2, Mentions: []int64{2, 3}}})
	require.NoError(t, err)
	require.Equal(t, Count{Known: true, Deleted: 2, FirstKept: 2, DeletedMentions: []int64{3}}, counts[0])

	n, err := s.TrimPG(ctx, []thread.Ref{{Channel: "c"}, {Channel: "d"}, {Channel: "c"}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	n, err = s.TrimPG(ctx, []thread.Ref{{Channel: "c"}})
	require.NoError(t, err)
	require.Zero(t, n)
}

// A thread's deleted replies are their own set beside the channel's
// (same table, root_seq > 0): read, counted, paged and trimmed apart.
func TestThreadDeletionsApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewStore(pgtest.NewSchema(t).Store, nil)
	w := int64(channel.DeletionWindow)
	n, err := s.WritePG(ctx, []channel.Deletions{{Channel: "c", Seqs: []int64{2}},
		{Channel: "c", Root: 5, Seqs: []int64{2, 3}}, {Channel: "c", Root: 7, Seqs: []int64{1, w + 1}}})
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	n, err = s.WritePG(ctx, []channel.Deletions{{Channel: "c", Root: 5, Seqs: []int64{3}}})
	require.NoError(t, err)
	require.Zero(t, n, "a repeated delete adds no row")

	got, err := s.ReadPG(ctx, channelRefs("c"))
	require.NoError(t, err)
	require.Equal(t, []channel.Deletions{{Channel: "c", Seqs: []int64{2}}}, got, "the channel's set holds no reply")
	got, err = s.ReadPG(ctx, []thread.Ref{{Channel: "c", Root: 7}, {Channel: "c", Root: 5}, {Channel: "c", Root: 9}})
	require.NoError(t, err)
	require.Equal(t, []channel.Deletions{{Channel: "c", Root: 5, Seqs: []int64{2, 3}}, {Channel: "c", Root: 7, Seqs: []int64{w + 1}}}, got,
		"each thread's window is its own")
	page, err := s.PagePG(ctx, thread.Ref{Channel: "c"}, 1)
	require.NoError(t, err)
	require.Equal(t, got[:1], page)

	counts, err := s.CountPG(ctx, []Query{{Ref: thread.Ref{Channel: "c", Root: 5}, Read: 1, Head: 4, Mentions: []int64{3, 4}},
		{Ref: thread.Ref{Channel: "c"}, Read: 1, Head: 4, Mentions: []int64{3}}})
	require.NoError(t, err)
	require.Equal(t, Count{Known: true, Deleted: 2, FirstKept: 4, DeletedMentions: []int64{3}}, counts[0])
	require.Equal(t, Count{Known: true, Deleted: 1, FirstKept: 3}, counts[1])

	n, err = s.TrimPG(ctx, []thread.Ref{{Channel: "c", Root: 7}, {Channel: "c", Root: 5}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "only thread 7's seq 1 is below its window")
}

// A long run of deletions right after the read is counted in one ordered
// pass, on a table Postgres has no statistics of yet (a self anti-join
// took minutes here for a run of 30,000; the deadline is a hang guard,
// not a timing). The sizes stop at their limit, and the pages walk the
// set in order.
func TestLongDeletionRunsAndPagedSets(t *testing.T) {
	t.Parallel()
	s := NewStore(pgtest.NewSchema(t).Store, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const run = 50_000
	seqs := make([]int64, run)
	for i := range seqs {
		seqs[i] = int64(i + 1)
	}
	seqs = append(seqs, run+2) // a gap at run+1
	_, err := s.WritePG(ctx, []channel.Deletions{{Channel: "long", Seqs: seqs}})
	require.NoError(t, err)
	got, err := s.CountPG(ctx, []Query{{Ref: thread.Ref{Channel: "long"}, Read: 0, Head: run + 10}, {Ref: thread.Ref{Channel: "long"}, Read: 10, Head: 20}, {Ref: thread.Ref{Channel: "none"}, Read: 3, Head: 9}})
	require.NoError(t, err)
	require.Equal(t, []Count{{Known: true, Deleted: run + 1, FirstKept: run + 1}, {Known: true, Deleted: 10, FirstKept: 21}, {Known: true, Deleted: 0, FirstKept: 4}}, got)

	sizes, err := s.SizesPG(ctx, []thread.Ref{{Channel: "none"}, {Channel: "long"}, {Channel: "long", Root: 3}}, 1000)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1000, 0}, sizes)
	var walked []int64
	for after := int64(0); ; {
		page, err := s.SeqsAfterPG(ctx, thread.Ref{Channel: "long"}, after, 7_000)
		require.NoError(t, err)
		walked = append(walked, page...)
		if len(page) < 7_000 {
			break
		}
		after = page[len(page)-1]
	}
	require.Equal(t, seqs, walked)
}
