package mentions

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// randomMentions draws a few seqs of one of few keys, so that values of
// one key meet and, with a small cap, the retention trims.
func randomMentions(r *rand.Rand) any {
	seqs := make([]int64, 1+r.IntN(3))
	for i := range seqs {
		seqs[i] = 1 + r.Int64N(30)
	}
	k := receipt.Key{User: "u" + strconv.Itoa(r.IntN(2)), Channel: "c" + strconv.Itoa(r.IntN(2))}
	return channel.Mentions{Key: k, Seqs: channel.MergeMentions(nil, seqs, 1000)}
}

// The kind passes the conformance suite: its rule obeys the merge laws,
// and add.lua and insert.sql (with trim.sql) keep what
// channel.MergeMentions keeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	env := kindtest.Env(t)
	env.MentionCap = 3 // small, so that the retention is part of the rule
	kindtest.MergeLaws(t, Kind, env, randomMentions)
	kindtest.StoresAgree(t, Kind, env, randomMentions)
}
