package privacy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/privacy"
)

func TestMergeConvergesInAnyOrder(t *testing.T) {
	all := []privacy.Settings{
		privacy.Default("u"),
		{User: "u", ShareRead: false, ShareDelivered: true, VersionMs: 5},
		{User: "u", ShareRead: true, ShareDelivered: true, VersionMs: 7},
		{User: "u", ShareRead: true, ShareDelivered: false, VersionMs: 7},
	}
	want := all[3] // newest; on the tie the one sharing less
	for _, p := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 3, 0, 1}, {1, 3, 2, 0}} {
		got := privacy.Settings{User: "u"}
		got.VersionMs = -1
		for _, i := range p {
			got, _ = privacy.Merge(got, all[i])
			got, _ = privacy.Merge(got, all[i])
		}
		require.Equal(t, want, got, "order %v", p)
	}
	_, adv := privacy.Merge(all[2], all[1])
	require.False(t, adv, "an older version loses")
}

func TestShares(t *testing.T) {
	s := privacy.Settings{ShareRead: false, ShareDelivered: true}
	require.False(t, s.Shares("r"))
	require.True(t, s.Shares("d"))
	require.True(t, privacy.Default("u").Shares("r"))
}
