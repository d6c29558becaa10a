package deletions

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/thread"
)

// A window that gathers a set's values (deletions) ends with what the
// pairwise merge gives, however the records fall, and a part split off
// (an erasure's rewrite) never sees the records folded afterwards.
func TestGatheredDeletionsSettleToTheMerge(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 9))
	for round := range 50 {
		part := Kind.NewPart(&kind.Env{}, 4)
		want := map[thread.Ref][]int64{}
		var split kind.Part
		var held []channel.Deletions // read at the split, not copied
		var atSplit [][]int64
		for i := range 40 {
			ref := thread.Ref{Channel: "c", Root: r.Int64N(2)}
			seqs := make([]int64, 1+r.IntN(8))
			for j := range seqs {
				// Mostly ascending, some repeats and some far below.
				seqs[j] = int64(i*5+j) + r.Int64N(3)
				if r.IntN(10) == 0 {
					seqs[j] = 1 + r.Int64N(int64(i+1))
				}
			}
			if r.IntN(20) == 0 {
				seqs = append(seqs, int64(i)*5+channel.DeletionWindow)
			}
			want[ref] = channel.MergeDeletions(want[ref], seqs)
			require.True(t, part.Fold(&event.Decoded{Deletions: &channel.Deletions{Channel: ref.Channel, Root: ref.Root, Seqs: seqs}}))
			if i == 20 {
				split = part.Only(func(string) bool { return true })
				held = kind.Sorted[channel.Deletions](part)
				atSplit = nil
				for _, d := range held {
					atSplit = append(atSplit, append([]int64(nil), d.Seqs...))
				}
			}
		}
		got := kind.Sorted[channel.Deletions](part)
		require.Len(t, got, len(want), "round %d", round)
		for _, d := range got {
			require.Equal(t, want[thread.Ref{Channel: d.Channel, Root: d.Root}], d.Seqs, "round %d", round)
		}
		// Deletions belong to no user: a split part is empty. The values
		// read at the split stay as they were: later records gathered onto
		// copies, not into memory a reader holds.
		require.Zero(t, split.Keys())
		for i, d := range held {
			require.Equal(t, atSplit[i], d.Seqs, "round %d", round)
		}
	}
}

// A full window of one channel's deletions (500 records of 256 seqs),
// folded by the part (gathered, settled once) and by the pairwise merge
// it replaced: per record.
func BenchmarkWindowFoldsDeletions(b *testing.B) {
	const records = 500
	evs := make([]channel.Deletions, records)
	for i := range evs {
		seqs := make([]int64, channel.MaxDeletedSeqs)
		for j := range seqs {
			seqs[j] = int64(i*len(seqs) + j + 1)
		}
		evs[i] = channel.Deletions{Channel: "c", Seqs: seqs}
	}
	b.Run("gathered", func(b *testing.B) {
		for range b.N {
			part := Kind.NewPart(&kind.Env{}, 1)
			for i := range evs {
				part.Fold(&event.Decoded{Deletions: &evs[i]})
			}
			part.Sort()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
	})
	b.Run("pairwise", func(b *testing.B) {
		for range b.N {
			var set []int64
			for i := range evs {
				set = channel.MergeDeletions(set, evs[i].Seqs)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
	})
}
