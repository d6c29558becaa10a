package channel_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

var k = receipt.Key{User: "u", Channel: "c"}

// fold merges items in the given order with merge.
func fold[T any](items []T, order []int, merge func(T, T) T) T {
	var acc T
	for _, i := range order {
		acc = merge(acc, items[i])
	}
	return acc
}

// orders returns a permutation and a shuffled permutation with duplicates.
func orders(rng *rand.Rand, n int) ([]int, []int) {
	a := rng.Perm(n)
	b := append(slices.Clone(a), a[:rng.IntN(n+1)]...)
	rng.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
	return a, b
}

func TestHeadIsMaxRegister(t *testing.T) {
	t.Parallel()
	h, adv := channel.MergeHead(channel.Head{}, channel.Head{Channel: "c", Seq: 5, MessageID: "m5"})
	require.True(t, adv)
	h2, adv := channel.MergeHead(h, channel.Head{Channel: "c", Seq: 4, MessageID: "m4"})
	require.False(t, adv)
	require.Equal(t, h, h2)
	h3, adv := channel.MergeHead(h, channel.Head{Channel: "c", Seq: 5, MessageID: "other"})
	require.False(t, adv, "a tie keeps the stored id")
	require.Equal(t, "m5", h3.MessageID)

	rng := rand.New(rand.NewPCG(1, 1))
	merge := func(a, b channel.Head) channel.Head { m, _ := channel.MergeHead(a, b); return m }
	for range 300 {
		heads := make([]channel.Head, 1+rng.IntN(10))
		for i := range heads {
			s := rng.Int64N(20)
			heads[i] = channel.Head{Channel: "c", Seq: s, MessageID: "m" + string(rune('a'+s))}
		}
		a, b := orders(rng, len(heads))
		require.Equal(t, fold(heads, a, merge), fold(heads, b, merge))
	}
}

// Join/leave ordering: the greater version wins whatever the arrival
// order, so a late or replayed change never undoes a newer one, and a
// re-join after a leave wins over both.
func TestMembershipOrdering(t *testing.T) {
	t.Parallel()
	join := channel.Join(k, 10, 1000, 10)
	leave := channel.Leave(k, 20, 2000)
	rejoin := channel.Join(k, 30, 3000, 30)

	m, ch := channel.MergeMembership(channel.Membership{}, join)
	require.True(t, ch)
	m, ch = channel.MergeMembership(m, leave)
	require.True(t, ch)
	require.False(t, m.Member)
	m, ch = channel.MergeMembership(m, join)
	require.False(t, ch, "a replayed join loses to the newer leave")
	require.False(t, m.Member)
	m, ch = channel.MergeMembership(m, rejoin)
	require.True(t, ch)
	require.Equal(t, rejoin, m)
	m, ch = channel.MergeMembership(m, leave)
	require.False(t, ch, "a late leave loses to the re-join")
	require.Equal(t, int64(30), m.JoinSeq)

	// Same channel seq: the later time wins; same version: join beats leave.
	require.Positive(t, channel.Join(k, 5, 2, 5).Compare(channel.Leave(k, 5, 1)))
	require.Negative(t, channel.Join(k, 5, 1, 5).Compare(channel.Leave(k, 5, 2)))
	require.Positive(t, channel.Join(k, 5, 1, 5).Compare(channel.Leave(k, 5, 1)))
	m, ch = channel.MergeMembership(join, join)
	require.False(t, ch, "a duplicate is a no-op")
	require.Equal(t, join, m)

	rng := rand.New(rand.NewPCG(2, 2))
	merge := func(a, b channel.Membership) channel.Membership { m, _ := channel.MergeMembership(a, b); return m }
	for range 300 {
		regs := make([]channel.Membership, 1+rng.IntN(10))
		for i := range regs {
			regs[i] = channel.Membership{Key: k, Member: rng.IntN(2) == 0, VersionSeq: rng.Int64N(4), VersionUnixMs: rng.Int64N(3), JoinSeq: rng.Int64N(3)}
		}
		a, b := orders(rng, len(regs))
		got := fold(regs, a, merge)
		require.Equal(t, got, fold(regs, b, merge))
		for _, r := range regs {
			require.GreaterOrEqual(t, got.Compare(r), 0)
		}
	}
}

func TestJoinRaisesPrivateReadOnly(t *testing.T) {
	t.Parallel()
	in := channel.JoinRead(channel.Join(k, 40, 1, 40))
	require.True(t, in.Read.Position.IsZero(), "nobody sees the joiner as having read the history")
	require.Equal(t, receipt.Position{Epoch: receipt.EpochCurrent, Seq: 40}, in.PrivateRead.Position)
}

// Mention retention keeps the newest cap+1 seqs; counts above any read
// seq stay exact up to "cap+", and a mark-unread makes the mentions at or
// above its seq count again.
func TestMentionRetentionAndCap(t *testing.T) {
	t.Parallel()
	const capN = 3
	var kept []int64
	for s := int64(1); s <= 10; s++ {
		kept = channel.MergeMentions(kept, []int64{s}, capN)
	}
	require.Equal(t, []int64{7, 8, 9, 10}, kept)
	n, capped := channel.MentionCount(kept, 0, capN)
	require.Equal(t, int64(4), n)
	require.True(t, capped, "more than cap: shown as cap+")
	n, capped = channel.MentionCount(kept, 7, capN)
	require.Equal(t, int64(3), n)
	require.False(t, capped)
	n, _ = channel.MentionCount(kept, 10, capN)
	require.Zero(t, n)

	// Read to 10, then mark unread from 9: the own read position is 8, and the
	// mentions 9 and 10 count again — they were kept though read.
	st, _ := receipt.Merge(receipt.State{}, receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 10}}})
	st, _ = receipt.Merge(st, receipt.MarkUnread(k, 9, st.ReadEpoch()))
	n, capped = channel.MentionCount(kept, st.EffectiveRead().Seq, capN)
	require.Equal(t, int64(2), n)
	require.False(t, capped)

	// Union then retain converges whatever the order and trimming moments.
	rng := rand.New(rand.NewPCG(3, 3))
	merge := func(a, b []int64) []int64 { return channel.MergeMentions(a, b, capN) }
	for range 300 {
		sets := make([][]int64, 1+rng.IntN(8))
		var all []int64
		for i := range sets {
			for range rng.IntN(4) {
				s := 1 + rng.Int64N(15)
				sets[i] = append(sets[i], s)
				all = append(all, s)
			}
		}
		a, b := orders(rng, len(sets))
		got := fold(sets, a, merge)
		require.Equal(t, got, fold(sets, b, merge))
		slices.Sort(all)
		all = slices.Compact(all)
		require.Equal(t, channel.Retain(all, capN), got)
		if got == nil {
			continue
		}
		// exact counts up to cap+ for every read seq
		for r := int64(0); r <= 16; r++ {
			var exact int64
			for _, s := range all {
				if s > r {
					exact++
				}
			}
			n, capped := channel.MentionCount(got, r, capN)
			if exact > capN {
				require.True(t, capped)
				require.Equal(t, int64(capN+1), n)
			} else {
				require.False(t, capped)
				require.Equal(t, exact, n)
			}
		}
	}
	require.Error(t, channel.ValidateMentionSeqs([]int64{1, 0}))
	require.Error(t, channel.ValidateMentionSeqs(make([]int64, channel.MaxMentionSeqs+1)))
}

func TestUnread(t *testing.T) {
	t.Parallel()
	st := receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 7}}, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 9}}}
	n, first := channel.Unread(12, st)
	require.Equal(t, int64(3), n, "the greater of public and private counts")
	require.Equal(t, int64(10), first)
	n, first = channel.Unread(5, st)
	require.Zero(t, n)
	require.Zero(t, first)
	n, first = channel.Unread(4, receipt.State{})
	require.Equal(t, int64(4), n)
	require.Equal(t, int64(1), first)
}
