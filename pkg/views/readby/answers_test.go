package readby

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

func cur(seq, at int64) Cursor { return Cursor{Position: receipt.Position{Seq: seq}, AtUnixMs: at} }

// A detailed channel's answers follow what each member shares: a hidden
// side is pending in read-by and left out of its watermark, the sender
// is never listed, and a member without a cursor holds the watermark at 0.
func TestSightAnswersHonourSharing(t *testing.T) {
	shareAll := privacy.Settings{ShareRead: true, ShareDelivered: true}
	s := &Sight{
		Channel: "g", MemberCount: 4, Detailed: true, Head: &channel.Head{Channel: "g", Seq: 9},
		Members: []string{"a", "b", "c", "d"},
		Settings: map[string]privacy.Settings{
			"a": shareAll, "b": {ShareRead: false, ShareDelivered: true}, "c": shareAll, "d": shareAll,
		},
		View: State{
			Read:      map[string]Cursor{"a": cur(7, 10), "b": cur(9, 11), "c": cur(3, 12), "d": cur(8, 13)},
			Delivered: map[string]Cursor{"a": cur(9, 10), "b": cur(9, 11), "d": cur(9, 13)},
		},
	}
	out, reached := s.Receipts(5, "d")
	require.Equal(t, []string{"b", "c"}, out.Pending, "b hides its read, c is behind, d sent it")
	require.Len(t, out.ReadBy, 1)
	require.Equal(t, "a", out.ReadBy[0].UserId)
	require.Equal(t, int64(10), out.ReadBy[0].AtUnixMs)
	require.Equal(t, int64(1), out.ReadCount)
	require.Equal(t, int64(2), out.DeliveredCount, "a and b delivered; c has no delivered cursor")
	require.ElementsMatch(t, []string{"a", "a", "b"}, reached)

	WithFirstReached(out, map[string]int64{"a": 5}, map[string]int64{"b": 6})
	require.Equal(t, int64(5), out.ReadBy[0].AtUnixMs)
	require.Equal(t, int64(6), out.DeliveredTo[1].AtUnixMs)
	require.Equal(t, int64(10), out.DeliveredTo[0].AtUnixMs, "no log row: the view's time stays")

	ticks := s.Ticks()
	require.Equal(t, int64(9), ticks.GetHead().GetSeq())
	require.Equal(t, int64(3), ticks.ReadByAllUpTo, "b's hidden read is skipped; c's 3 is the least")
	require.Equal(t, int64(0), ticks.DeliveredToAllUpTo, "c shares delivered but has none")
	require.Len(t, ticks.Members, 4)
	require.Nil(t, ticks.Members[1].Read, "b's read is not shown")
}

// A large channel's watermark is the least of a sorted set only when the
// set covers every member.
func TestCountedTicksNeedEveryMember(t *testing.T) {
	s := &Sight{Channel: "big", MemberCount: 3}
	ticks := s.CountedTicks(Counts{ReadMembers: 3, LeastRead: 4, DeliveredMembers: 2, LeastDelivered: 6})
	require.Equal(t, int64(4), ticks.ReadByAllUpTo)
	require.Equal(t, int64(0), ticks.DeliveredToAllUpTo)
	r := s.CountedReceipts(5, "x", Counts{Read: 2, Delivered: 1})
	require.False(t, r.Detailed)
	require.Equal(t, int64(2), r.ReadCount)
}

// A rebuild puts back only what members share and nothing an erasure
// Redis knows of came after; merging keeps each member's greater cursor.
func TestRebuildMovesDropErasedAndHidden(t *testing.T) {
	page := []MemberCursor{
		{User: "a", Read: receipt.Position{Seq: 4}, Delivered: receipt.Position{Seq: 5}, UpdatedAtUnixMs: 100, ShareRead: true, ShareDelivered: true},
		{User: "b", Read: receipt.Position{Seq: 4}, UpdatedAtUnixMs: 100, ShareRead: false, ShareDelivered: true},
		{User: "gone", Read: receipt.Position{Seq: 4}, UpdatedAtUnixMs: 100, ShareRead: true, ShareDelivered: true},
	}
	tombs := tombstone.Set{}
	tombs.Add(tombstone.Tombstone{User: "gone", Generation: 200, ErasedAtUnixMs: 200})
	moves := RebuildMoves("g", page, tombs)
	require.Equal(t, []Move{
		{Channel: "g", User: "a", Side: Read, Position: receipt.Position{Seq: 4}, AtUnixMs: 100},
		{Channel: "g", User: "a", Side: Delivered, Position: receipt.Position{Seq: 5}, AtUnixMs: 100},
	}, moves)

	v := State{Read: map[string]Cursor{"a": cur(6, 50)}, Delivered: map[string]Cursor{}}
	MergeMoves(&v, moves)
	require.Equal(t, cur(6, 50), v.Read["a"], "the view's newer cursor stays")
	require.Equal(t, cur(5, 100), v.Delivered["a"])
}
