package groupmentions

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
)

// randomGroupMentions draws a channel's group mentions over few channels,
// seqs and senders (the empty sender, an erased one's, among them), so
// that a seq meets several senders and the retention trims.
func randomGroupMentions(r *rand.Rand) any {
	g := channel.GroupMentions{Channel: "c" + strconv.Itoa(r.IntN(2))}
	for range 1 + r.IntN(3) {
		g.Mentions = append(g.Mentions, channel.GroupMention{Seq: 1 + r.Int64N(6), Sender: []string{"", "a", "b"}[r.IntN(3)]})
	}
	g.Mentions = channel.MergeGroupMentions(nil, g.Mentions, len(g.Mentions))
	return g
}

// The kind passes the conformance suite: its rule obeys the merge laws,
// and merge.lua and insert.sql (with trim.sql) keep what
// channel.MergeGroupMentions keeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	env := kindtest.Env(t)
	env.MentionCap = 3
	kindtest.MergeLaws(t, Kind, env, randomGroupMentions)
	kindtest.StoresAgree(t, Kind, env, randomGroupMentions)
}
