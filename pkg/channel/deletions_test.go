package channel_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// The deletions are a set union: commutative, associative, idempotent,
// whatever the order, duplicates and grouping of the parts.
func TestDeletionsMergeLaws(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	for range 500 {
		parts := make([][]int64, 1+rng.IntN(6))
		for i := range parts {
			for range rng.IntN(6) {
				parts[i] = append(parts[i], 1+rng.Int64N(30))
			}
			slices.Sort(parts[i])
			parts[i] = slices.Compact(parts[i])
		}
		a, b := orders(rng, len(parts))
		x, y := fold(parts, a, channel.MergeDeletions), fold(parts, b, channel.MergeDeletions)
		require.Equal(t, x, y)
		require.Equal(t, x, channel.MergeDeletions(x, x), "idempotent")
		require.True(t, slices.IsSorted(x))
		require.Equal(t, x, slices.Compact(slices.Clone(x)), "distinct")
		// Grouping: (p0 ∪ p1) ∪ rest = p0 ∪ (p1 ∪ rest).
		if len(parts) >= 3 {
			l := channel.MergeDeletions(channel.MergeDeletions(parts[0], parts[1]), parts[2])
			r := channel.MergeDeletions(parts[0], channel.MergeDeletions(parts[1], parts[2]))
			require.Equal(t, l, r)
		}
	}
}

// The window keeps the seqs within DeletionWindow of the greatest and
// commutes with the union.
func TestDeletionsWindow(t *testing.T) {
	t.Parallel()
	w := int64(channel.DeletionWindow)
	require.Equal(t, []int64{5 + 1, w + 5}, channel.MergeDeletions([]int64{1, 5, 6}, []int64{w + 5}))
	require.Equal(t, []int64{1, w}, channel.MergeDeletions([]int64{1}, []int64{w}), "the window's lowest seq is kept")
	a, b := []int64{3, w / 2}, []int64{w + 4}
	whole := channel.MergeDeletions(append(slices.Clone(a), b...), nil)
	require.Equal(t, whole, channel.MergeDeletions(channel.MergeDeletions(a, nil), channel.MergeDeletions(b, nil)))
	require.Equal(t, []int64{w / 2, w + 4}, whole)
}

func TestUnreadDeleted(t *testing.T) {
	t.Parallel()
	st := func(read int64) receipt.State {
		return receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: read}}}
	}
	for name, tc := range map[string]struct {
		head, read   int64
		deleted      []int64
		count, first int64
	}{
		"none":                 {10, 0, nil, 10, 1},
		"two deleted":          {10, 0, []int64{7, 9}, 8, 1},
		"first deleted":        {10, 0, []int64{1, 2, 3}, 7, 4},
		"below the read":       {10, 5, []int64{1, 5}, 5, 6},
		"above the head":       {10, 5, []int64{11, 12}, 5, 6},
		"all deleted":          {10, 5, []int64{6, 7, 8, 9, 10}, 0, 0},
		"read at head":         {10, 10, []int64{3}, 0, 0},
		"run after the read":   {10, 5, []int64{6, 7, 9}, 2, 8},
		"deletion at the head": {10, 8, []int64{10}, 1, 9},
	} {
		c, f := channel.UnreadDeleted(tc.head, st(tc.read), tc.deleted)
		require.Equal(t, [2]int64{tc.count, tc.first}, [2]int64{c, f}, name)
	}
	// A brute-force model: count and first of the seqs in (read, head]
	// not deleted.
	rng := rand.New(rand.NewPCG(3, 3))
	for range 500 {
		head, read := rng.Int64N(40), rng.Int64N(40)
		var del []int64
		for range rng.IntN(30) {
			del = append(del, 1+rng.Int64N(45))
		}
		del = channel.MergeDeletions(del, nil)
		var want, first int64
		for s := read + 1; s <= head; s++ {
			if !slices.Contains(del, s) {
				want++
				if first == 0 {
					first = s
				}
			}
		}
		c, f := channel.UnreadDeleted(head, st(read), del)
		require.Equal(t, [2]int64{want, first}, [2]int64{c, f}, "head %d read %d deleted %v", head, read, del)
		require.Equal(t, int64(len(del))-channel.DeletedIn(del, -1, 0)-channel.DeletedIn(del, 50, 60), channel.DeletedIn(del, 0, 50))
	}
}

func TestMentionCountDeleted(t *testing.T) {
	t.Parallel()
	n, capped := channel.MentionCountDeleted([]int64{3, 7, 9}, 0, 100, []int64{7, 9})
	require.Equal(t, int64(1), n)
	require.False(t, capped)
	n, _ = channel.MentionCountDeleted([]int64{3, 7, 9}, 3, 100, []int64{8})
	require.Equal(t, int64(2), n)
	n, capped = channel.MentionCountDeleted([]int64{1, 2, 3}, 0, 1, nil)
	require.Equal(t, int64(3), n)
	require.True(t, capped)
}

func TestDeletionsValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, channel.Deletions{Channel: "c", Seqs: []int64{1}}.Validate())
	require.Error(t, channel.Deletions{Channel: "c"}.Validate())
	require.Error(t, channel.Deletions{Channel: "c", Seqs: []int64{0}}.Validate())
	require.Error(t, channel.Deletions{Channel: "", Seqs: []int64{1}}.Validate())
	require.Error(t, channel.Deletions{Channel: "c", Seqs: make([]int64, channel.MaxDeletedSeqs+1)}.Validate())
	require.NoError(t, channel.Deletions{Channel: "c", Root: 4, Seqs: []int64{1}}.Validate(), "a thread's replies")
	require.Error(t, channel.Deletions{Channel: "c", Root: -1, Seqs: []int64{1}}.Validate())
}

// A persister batch folds one channel's deletion events into its set:
// from a set at the window's size, each event of MaxDeletedSeqs costs one
// linear pass.
func BenchmarkMergeDeletionsFold(b *testing.B) {
	set := make([]int64, channel.DeletionWindow/2)
	for i := range set {
		set[i] = int64(2*i + 1)
	}
	top := set[len(set)-1]
	ev := make([]int64, channel.MaxDeletedSeqs)
	b.ResetTimer()
	for i := range b.N {
		for j := range ev {
			ev[j] = top + int64(i*len(ev)+j+1)
		}
		set = channel.MergeDeletions(set, ev)
	}
}
