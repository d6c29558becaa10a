package deletions

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
)

// randomDeletions draws a set's deletions over few channels and roots
// (root 0 the channel's set, 1 and 2 threads' beside it) and few seqs,
// now and then one far above the rest, so that the window is part of the
// rule.
func randomDeletions(r *rand.Rand) any {
	seqs := make([]int64, 1+r.IntN(4))
	for i := range seqs {
		seqs[i] = 1 + r.Int64N(30)
		if r.IntN(12) == 0 {
			seqs[i] += channel.DeletionWindow - 10
		}
	}
	return channel.Deletions{Channel: "c" + strconv.Itoa(r.IntN(3)), Root: r.Int64N(3), Seqs: channel.MergeDeletions(nil, seqs), UpdatedAtUnixMs: 1 + r.Int64N(1e6)}
}

// The kind passes the conformance suite: its rule obeys the merge laws,
// and add.lua and insert.sql (with trim.sql) keep what
// channel.MergeDeletions keeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	env := kindtest.Env(t)
	kindtest.MergeLaws(t, Kind, env, randomDeletions)
	kindtest.StoresAgree(t, Kind, env, randomDeletions)
}
