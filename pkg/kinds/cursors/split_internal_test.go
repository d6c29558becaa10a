package cursors

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

// splitByRow keeps each part in order, and hands an all-fresh or all-old
// batch back whole.
func TestSplitByRowKeepsOrder(t *testing.T) {
	t.Parallel()
	var sorted []receipt.State
	for _, u := range []string{"a", "b", "c", "d", "e"} {
		sorted = append(sorted, receipt.State{Key: receipt.Key{User: u, Channel: "c"}})
	}
	users := func(sts []receipt.State) []string {
		var out []string
		for _, s := range sts {
			out = append(out, s.Key.User)
		}
		return out
	}
	rowOf := func(us ...string) func(receipt.Key) bool {
		return func(k receipt.Key) bool {
			for _, u := range us {
				if k.User == u {
					return true
				}
			}
			return false
		}
	}

	fresh, old := splitByRow(sorted, rowOf("b", "e"))
	require.Equal(t, []string{"a", "c", "d"}, users(fresh))
	require.Equal(t, []string{"b", "e"}, users(old))

	fresh, old = splitByRow(sorted, rowOf())
	require.Equal(t, users(sorted), users(fresh))
	require.Empty(t, old)

	fresh, old = splitByRow(sorted, rowOf("a", "b", "c", "d", "e"))
	require.Empty(t, fresh)
	require.Equal(t, users(sorted), users(old))
}
