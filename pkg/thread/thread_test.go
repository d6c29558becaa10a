package thread_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

func randomState(r *rand.Rand, k thread.Key) thread.State {
	pos := func() receipt.Position {
		if r.IntN(3) == 0 {
			return receipt.Position{}
		}
		return receipt.Position{Epoch: int64(r.IntN(3)), Seq: int64(1 + r.IntN(20))}
	}
	st := thread.State{Key: k}
	if p := pos(); !p.IsZero() {
		st.Cursors.Read = receipt.Cursor{Position: p, MessageID: "m"}
		st.Cursors.UpdatedAtUnixMs = int64(r.IntN(100))
	}
	st.Cursors.PrivateRead.Position = pos()
	if r.IntN(2) == 0 {
		st.Follow = thread.Follow{Following: r.IntN(2) == 0, VersionUnixMs: int64(1 + r.IntN(5))}
	}
	for range r.IntN(3) {
		st.Mentions = channel.MergeMentions(st.Mentions, []int64{int64(1 + r.IntN(20))}, 3)
	}
	return st
}

// The register's rule is a semilattice: stores that apply the same values
// in any order, any number of times, converge.
func TestMergeConverges(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	k := thread.Key{User: "u", Ref: thread.Ref{Channel: "c", Root: 1}}
	fold := func(vals []thread.State) thread.State {
		out := thread.State{Key: k}
		for _, v := range vals {
			out, _ = thread.Merge(out, v, 3)
		}
		return out
	}
	for range 2000 {
		vals := make([]thread.State, 1+r.IntN(6))
		for i := range vals {
			vals[i] = randomState(r, k)
		}
		want := fold(vals)
		shuffled := append([]thread.State(nil), vals...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, shuffled[:r.IntN(len(shuffled))]...)
		got := fold(shuffled)
		require.True(t, thread.Same(want, got), "order and duplicates changed the result: %+v vs %+v", want, got)
		again, moved := thread.Merge(got, got, 3)
		require.False(t, moved, "merging a register into itself moves nothing")
		require.True(t, thread.Same(got, again))
	}
}

func TestCountsAndFollows(t *testing.T) {
	t.Parallel()
	k := thread.Key{User: "u", Ref: thread.Ref{Channel: "c", Root: 1}}
	st := thread.State{Key: k, Cursors: receipt.State{Read: receipt.Cursor{Position: receipt.Position{Seq: 3}}},
		Mentions: []int64{2, 5, 6}, Follow: thread.Follow{Following: true, VersionUnixMs: 10}}
	require.Equal(t, thread.Counts{Unread: 4, FirstUnread: 4, Mentions: 2}, st.CountsAt(7, 100))
	require.Equal(t, thread.Counts{}, st.CountsAt(3, 100), "read to the head: no unread, no mentions")

	un := thread.MarkUnread(k, 2, st.Cursors.ReadEpoch())
	merged, moved := thread.Merge(st, un, 100)
	require.True(t, moved)
	require.Equal(t, receipt.Position{Seq: 3}, merged.Cursors.Read.Position, "the public thread read does not move back")
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 1}, merged.Cursors.EffectiveRead())
	require.Equal(t, int64(6), merged.CountsAt(7, 100).Unread)
	_, moved = thread.Merge(merged, thread.MarkUnread(k, 2, 0), 100)
	require.False(t, moved, "a retried mark-unread is a no-op")
	stale := thread.State{Key: k, Cursors: receipt.State{Read: receipt.Cursor{Position: receipt.Position{Seq: 7}}}}
	after, _ := thread.Merge(merged, stale, 100)
	require.Equal(t, receipt.Position{Seq: 7}, after.Cursors.Read.Position, "the stale read was a read: public")
	require.Equal(t, int64(6), after.CountsAt(7, 100).Unread, "a read of the old epoch loses in the user's view")

	joined := channel.Join(k.ChannelKey(), 1, 5, 0)
	require.True(t, st.Active(joined))
	left := channel.Leave(k.ChannelKey(), 2, 20)
	require.False(t, st.Active(left), "leaving the channel ends the follow")
	rejoined := channel.Join(k.ChannelKey(), 3, 30, 0)
	require.False(t, st.Active(rejoined), "a rejoin does not bring an old follow back")
	st.Follow = thread.Follow{Following: true, VersionUnixMs: 31}
	require.True(t, st.Active(rejoined))

	unf, _ := thread.Merge(st, thread.State{Key: k, Follow: thread.Follow{VersionUnixMs: 31}}, 100)
	require.True(t, unf.Follow.Following, "a follow wins over an unfollow of the same version")
}

// A thread's deleted replies leave its counts as a brute-force count
// says: the unread are the replies in (read, head] not deleted, the first
// unread the least of them, the mentions the kept ones among them; no
// deletions are CountsAt.
func TestCountsDeleted(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	const mentionCap = 3
	for range 2000 {
		st := randomState(r, thread.Key{User: "u", Ref: thread.Ref{Channel: "c", Root: 1}})
		head := int64(r.IntN(25))
		var deleted []int64
		for range r.IntN(8) {
			deleted = append(deleted, int64(1+r.IntN(25)))
		}
		deleted = channel.MergeDeletions(nil, deleted)
		require.Equal(t, st.CountsAt(head, mentionCap), st.CountsDeleted(head, mentionCap, nil))

		read := st.Cursors.EffectiveRead().Seq
		var want thread.Counts
		for q := read + 1; q <= head; q++ {
			if !slices.Contains(deleted, q) {
				want.Unread++
				if want.FirstUnread == 0 {
					want.FirstUnread = q
				}
			}
		}
		if want.Unread > 0 {
			for _, m := range st.Mentions {
				if m > read && !slices.Contains(deleted, m) {
					want.Mentions++
				}
			}
			want.MentionsCapped = want.Mentions > mentionCap
		}
		require.Equal(t, want, st.CountsDeleted(head, mentionCap, deleted), "read %d head %d deleted %v mentions %v", read, head, deleted, st.Mentions)
	}
}
