package channel_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
)

func randomGroupMentions(r *rand.Rand) []channel.GroupMention {
	senders := []string{"", "a", "b", "c"}
	var out []channel.GroupMention
	for range r.IntN(8) {
		out = append(out, channel.GroupMention{Seq: 1 + r.Int64N(12), Sender: senders[r.IntN(len(senders))]})
	}
	return channel.MergeGroupMentions(nil, out, 100)
}

func TestMergeGroupMentionsLaws(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const cap = 4
	for range 2000 {
		a, b, c := randomGroupMentions(r), randomGroupMentions(r), randomGroupMentions(r)
		m := func(x, y []channel.GroupMention) []channel.GroupMention { return channel.MergeGroupMentions(x, y, cap) }
		require.Equal(t, m(a, b), m(b, a), "commutative")
		require.Equal(t, m(m(a, b), c), m(a, m(b, c)), "associative")
		ab := m(a, b)
		require.Equal(t, ab, m(ab, ab), "idempotent")
		require.LessOrEqual(t, len(ab), cap+1, "bounded")
		for i := 1; i < len(ab); i++ {
			require.Less(t, ab[i-1].Seq, ab[i].Seq, "one per seq, ascending")
		}
	}
}

func TestMergeGroupMentionsKeepsNewestAndLeastSender(t *testing.T) {
	got := channel.MergeGroupMentions([]channel.GroupMention{{Seq: 1, Sender: "z"}, {Seq: 2, Sender: "b"}},
		[]channel.GroupMention{{Seq: 2, Sender: "a"}, {Seq: 3}}, 1)
	require.Equal(t, []channel.GroupMention{{Seq: 2, Sender: "a"}, {Seq: 3}}, got)
}

func TestMentionCountWithGroup(t *testing.T) {
	gms := []channel.GroupMention{{Seq: 3, Sender: "u"}, {Seq: 4, Sender: "v"}, {Seq: 6}}
	group := channel.GroupMentionSeqsFor(gms, "u", 2)
	require.Equal(t, []int64{4, 6}, group, "the user's own group mention is left out")
	n, capped := channel.MentionCountWithGroup([]int64{1, 4, 5}, group, 2, 10)
	require.Equal(t, int64(3), n, "4 counted once; 1 is read")
	require.False(t, capped)
	n, capped = channel.MentionCountWithGroup([]int64{1, 4, 5}, group, 2, 2)
	require.Equal(t, int64(3), n)
	require.True(t, capped)
}
