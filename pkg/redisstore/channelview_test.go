package redisstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// The view keeps each member's greatest public cursor per kind: a move
// that does not advance (a duplicate, a reordered older one) changes
// nothing and is not streamed; the read is ordered by (seq, epoch), as the
// public read merges, so a greater epoch at a lower seq (an older build's
// mark-unread) does not move it back while a greater seq of an older epoch
// moves it; counts and the least seq follow the sorted sets; a member
// the register says has left is refused, and a removal takes a member out.
func TestChannelViewMaxRegisterStreamAndCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	rdb := s.Client()
	mv := func(user string, k ViewKind, e, seq, at int64) ViewMove {
		return ViewMove{Channel: "g", User: user, Kind: k, Position: receipt.Position{Epoch: e, Seq: seq}, AtUnixMs: at}
	}
	ids, err := s.ApplyViewMoves(ctx, []ViewMove{mv("a", ViewRead, 0, 5, 100), mv("a", ViewDelivered, 0, 7, 100), mv("b", ViewRead, 0, 3, 101)}, 0)
	require.NoError(t, err)
	for _, id := range ids {
		require.NotEmpty(t, id, "every first move is streamed")
	}
	ids, err = s.ApplyViewMoves(ctx, []ViewMove{mv("a", ViewRead, 0, 5, 200), mv("a", ViewRead, 0, 4, 200), mv("b", ViewRead, 0, 9, 201)}, 0)
	require.NoError(t, err)
	require.Equal(t, "", ids[0], "a duplicate changes nothing")
	require.Equal(t, "", ids[1], "an older move changes nothing")
	require.NotEmpty(t, ids[2])

	views, err := s.ReadViews(ctx, []string{"g", "none"})
	require.NoError(t, err)
	v := views[0]
	require.Equal(t, ViewCursor{Position: receipt.Position{Seq: 5}, AtUnixMs: 100}, v.Read["a"])
	require.Equal(t, ViewCursor{Position: receipt.Position{Seq: 9}, AtUnixMs: 201}, v.Read["b"])
	require.Equal(t, int64(7), v.Delivered["a"].Position.Seq)
	require.Equal(t, ids[2], v.LastID, "the snapshot names the stream's last entry")
	require.Empty(t, views[1].Read)
	require.Empty(t, views[1].LastID)
	n, err := rdb.XLen(ctx, s.ViewStreamKey("g")).Result()
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "one entry per advancing move")
	entries, err := rdb.XRange(ctx, s.ViewStreamKey("g"), "-", "+").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]any{"u": "b", "k": "r", "e": "0", "s": "9", "t": "201"}, entries[3].Values)

	c, err := s.CountView(ctx, "g", 5, "")
	require.NoError(t, err)
	require.Equal(t, ViewCounts{Read: 2, Delivered: 1, ReadMembers: 2, DeliveredMembers: 1, LeastRead: 5, LeastDelivered: 7}, c)
	c, err = s.CountView(ctx, "g", 5, "b")
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Read, "the excluded sender is not counted")

	// (1, 2) does not beat (0, 5); (1, 5) does, and (0, 6) beats (1, 5).
	ids, err = s.ApplyViewMoves(ctx, []ViewMove{mv("a", ViewRead, 1, 2, 300)}, 0)
	require.NoError(t, err)
	require.Equal(t, "", ids[0], "the public read never moves back")
	ids, err = s.ApplyViewMoves(ctx, []ViewMove{mv("a", ViewRead, 1, 5, 300), mv("a", ViewRead, 0, 6, 301)}, 0)
	require.NoError(t, err)
	require.NotEmpty(t, ids[0])
	require.NotEmpty(t, ids[1], "a greater seq of an older epoch moves the public read")
	c, err = s.CountView(ctx, "g", 6, "")
	require.NoError(t, err)
	require.Equal(t, int64(2), c.Read)
	require.Equal(t, int64(6), c.LeastRead)

	// A leave: the register says "not a member", so a late move is refused.
	_, err = s.MergeMemberships(ctx, []channel.Membership{{Key: receipt.Key{User: "b", Channel: "g"}, Member: false, VersionSeq: 1, VersionUnixMs: 1}})
	require.NoError(t, err)
	before, err := s.Client().XLen(ctx, s.ViewStreamKey("g")).Result()
	require.NoError(t, err)
	require.NoError(t, s.RemoveFromView(ctx, "g", []string{"b"}, ViewRead, ViewDelivered))
	// b had a read in the view, no delivered: one removal entry, for it.
	tail, err := s.Client().XRevRangeN(ctx, s.ViewStreamKey("g"), "+", "-", 2).Result()
	require.NoError(t, err)
	after, err := s.Client().XLen(ctx, s.ViewStreamKey("g")).Result()
	require.NoError(t, err)
	require.Equal(t, before+1, after, "one removal entry per cursor taken out")
	require.Equal(t, "b", tail[0].Values["u"])
	require.Equal(t, "r", tail[0].Values["k"])
	require.Equal(t, "1", tail[0].Values["rm"])
	require.NotContains(t, tail[0].Values, "s", "a removal carries no position")
	require.NoError(t, s.RemoveFromView(ctx, "g", []string{"b"}, ViewRead, ViewDelivered))
	again, err := s.Client().XLen(ctx, s.ViewStreamKey("g")).Result()
	require.NoError(t, err)
	require.Equal(t, after, again, "removing what is not there streams nothing")
	ids, err = s.ApplyViewMoves(ctx, []ViewMove{mv("b", ViewRead, 0, 20, 400)}, 0)
	require.NoError(t, err)
	require.Equal(t, "", ids[0])
	views, err = s.ReadViews(ctx, []string{"g"})
	require.NoError(t, err)
	require.NotContains(t, views[0].Read, "b")
}

func TestChannelViewRebuildDoesNotStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	rdb := s.Client()
	require.NoError(t, s.RebuildView(ctx, []string{"g"}, []ViewMove{{Channel: "g", User: "a", Kind: ViewRead, Position: receipt.Position{Seq: 3}, AtUnixMs: 1}}, 60e9))
	n, err := rdb.Exists(ctx, s.ViewStreamKey("g")).Result()
	require.NoError(t, err)
	require.Zero(t, n)
	views, err := s.ReadViews(ctx, []string{"g"})
	require.NoError(t, err)
	require.True(t, views[0].Loaded)
	require.Equal(t, int64(3), views[0].Read["a"].Position.Seq)
}
