package tombstone_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

func TestMergeIsAMaxRegister(t *testing.T) {
	a := tombstone.Tombstone{User: "u", Generation: 5, ErasedAtUnixMs: 100}
	b := tombstone.Tombstone{User: "u", Generation: 7, ErasedAtUnixMs: 90}
	c := tombstone.Tombstone{User: "u", Generation: 7, ErasedAtUnixMs: 95}
	all := []tombstone.Tombstone{a, b, c}
	// Every order of merging gives the greatest generation, ties by time.
	for _, p := range [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		var got tombstone.Tombstone
		for _, i := range p {
			got, _ = tombstone.Merge(got, all[i])
			got, _ = tombstone.Merge(got, all[i]) // idempotent
		}
		require.Equal(t, c, got, "order %v", p)
	}
	_, adv := tombstone.Merge(c, b)
	require.False(t, adv, "an older tombstone does not advance")
	_, adv = tombstone.Merge(b, c)
	require.True(t, adv)
}

func TestNextGenerationGrowsEvenWhenTheStoredOneIsLost(t *testing.T) {
	require.Equal(t, int64(1000), tombstone.NextGeneration(0, 1000))
	require.Equal(t, int64(1001), tombstone.NextGeneration(1000, 1000), "same millisecond: one more")
	require.Equal(t, int64(5001), tombstone.NextGeneration(5000, 1000), "a clock behind the stored generation")
	// A store that lost the tombstone (stored 0) still goes above an
	// earlier erasure's generation, which was an earlier time.
	require.Greater(t, tombstone.NextGeneration(0, 2000), tombstone.NextGeneration(0, 1000))
}

func TestDrops(t *testing.T) {
	skew := tombstone.ClockSkew.Milliseconds()
	ts := tombstone.Tombstone{User: "u", Generation: 10_000, ErasedAtUnixMs: 10_000}
	for _, tc := range []struct {
		name    string
		gen     int64
		stamped bool
		acc     int64
		want    bool
	}{
		{"in flight before the erasure, unstamped", 0, false, 9_000, true},
		{"in flight before the erasure, older generation", 500, true, 9_999, true},
		{"accepted at the erasure's time", 0, false, 10_000, true},
		{"unstamped within the clock skew after", 0, false, 10_000 + skew, true},
		{"unstamped beyond the clock skew after", 0, false, 10_001 + skew, false},
		{"stamped never erased, accepted before the erasure by a clock ten minutes ahead", 0, true, 10_000 + 600_000, true},
		{"stamped older generation, accepted by a clock ten minutes ahead", 500, true, 10_000 + 600_000, true},
		{"stamped with the erasure's generation, accepted earlier by a slow clock", 10_000, true, 1, false},
		{"a later generation", 20_000, true, 1, false},
	} {
		require.Equal(t, tc.want, ts.Drops(tc.gen, tc.stamped, tc.acc), tc.name)
	}
	require.False(t, tombstone.Tombstone{}.Drops(0, true, 0), "no tombstone drops nothing")

	set := tombstone.Set{}
	set.Add(ts)
	set.Add(tombstone.Tombstone{User: "u", Generation: 3, ErasedAtUnixMs: 3})
	require.True(t, set.Drops("u", 0, false, 9_000), "the set keeps the latest erasure")
	require.False(t, set.Drops("other", 0, true, 9_000))
}

func TestPredates(t *testing.T) {
	ts := tombstone.Tombstone{User: "u", Generation: 1, ErasedAtUnixMs: 10_000}
	require.True(t, ts.Predates(10_000))
	require.False(t, ts.Predates(10_001+tombstone.ClockSkew.Milliseconds()))
	require.False(t, tombstone.Tombstone{}.Predates(0))
}

func TestValidate(t *testing.T) {
	require.NoError(t, tombstone.Tombstone{User: "u", Generation: 1}.Validate())
	require.ErrorContains(t, tombstone.Tombstone{User: "", Generation: 1}.Validate(), "user_id: is required")
	require.NoError(t, tombstone.Tombstone{User: "@a:b", Generation: 1}.Validate())
	require.ErrorContains(t, tombstone.Tombstone{User: "a}b", Generation: 1}.Validate(), "contains '}'")
	require.ErrorContains(t, tombstone.Tombstone{User: "u"}.Validate(), "erased_generation: must be between 1 and")
	require.ErrorContains(t, tombstone.Tombstone{User: "u", Generation: 1, ErasedAtUnixMs: -1}.Validate(), "accepted_at_unix_ms")
	// A foreign record's generation far past its time would drop every
	// later write of the user: refused.
	require.ErrorContains(t, tombstone.Tombstone{User: "u", Generation: math.MaxInt64, ErasedAtUnixMs: 1}.Validate(), "erased_generation")
	require.ErrorContains(t, tombstone.Tombstone{User: "u", Generation: 1_000 + tombstone.MaxGenerationLead + 1, ErasedAtUnixMs: 1_000}.Validate(), "ahead of the erasure's time")
	require.NoError(t, tombstone.Tombstone{User: "u", Generation: 1_000 + tombstone.MaxGenerationLead, ErasedAtUnixMs: 1_000}.Validate())
	require.Equal(t, receipt.MaxSeq, tombstone.Next(receipt.MaxSeq), "saturates")
	require.EqualValues(t, 8, tombstone.Next(7))
}
