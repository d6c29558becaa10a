package readby

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
)

// newTestStore is the view on a Redis key prefix of the test's own.
func newTestStore(t *testing.T) Store { return NewStore(nil, kindtest.Redis(t, Scripts...)) }

// The view keeps each member's greatest public cursor per side: a move
// that does not advance (a duplicate, a reordered older one) changes
// nothing and is not streamed; the read is ordered by (seq, epoch), as the
// public read merges, so a greater epoch at a lower seq (an older build's
// mark-unread) does not move it back while a greater seq of an older epoch
// moves it; counts and the least seq follow the sorted sets; a member
// the register says has left is refused, and a removal takes a member out.
func TestChannelViewMaxRegisterStreamAndCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	rdb := s.redis.Client()
	mv := func(user string, k Side, e, seq, at int64) Move {
		return Move{Channel: "g", User: user, Side: k, Position: receipt.Position{Epoch: e, Seq: seq}, AtUnixMs: at}
	}
	ids, err := s.Apply(ctx, []Move{mv("a", Read, 0, 5, 100), mv("a", Delivered, 0, 7, 100), mv("b", Read, 0, 3, 101)}, 0)
	require.NoError(t, err)
	for _, id := range ids {
		require.NotEmpty(t, id, "every first move is streamed")
	}
	ids, err = s.Apply(ctx, []Move{mv("a", Read, 0, 5, 200), mv("a", Read, 0, 4, 200), mv("b", Read, 0, 9, 201)}, 0)
	require.NoError(t, err)
	require.Equal(t, "", ids[0], "a duplicate changes nothing")
	require.Equal(t, "", ids[1], "an older move changes nothing")
	require.NotEmpty(t, ids[2])

	views, err := s.ReadAll(ctx, []string{"g", "none"})
	require.NoError(t, err)
	v := views[0]
	require.Equal(t, Cursor{Position: receipt.Position{Seq: 5}, AtUnixMs: 100}, v.Read["a"])
	require.Equal(t, Cursor{Position: receipt.Position{Seq: 9}, AtUnixMs: 201}, v.Read["b"])
	require.Equal(t, int64(7), v.Delivered["a"].Position.Seq)
	require.Equal(t, ids[2], v.LastID, "the snapshot names the stream's last entry")
	require.Empty(t, views[1].Read)
	require.Empty(t, views[1].LastID)
	n, err := rdb.XLen(ctx, s.StreamKey("g")).Result()
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "one entry per advancing move")
	entries, err := rdb.XRange(ctx, s.StreamKey("g"), "-", "+").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]any{"u": "b", "k": "r", "e": "0", "s": "9", "t": "201"}, entries[3].Values)

	c, err := s.Count(ctx, "g", 5, "")
	require.NoError(t, err)
	require.Equal(t, Counts{Read: 2, Delivered: 1, ReadMembers: 2, DeliveredMembers: 1, LeastRead: 5, LeastDelivered: 7}, c)
	c, err = s.Count(ctx, "g", 5, "b")
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Read, "the excluded sender is not counted")

	// (1, 2) does not beat (0, 5); (1, 5) does, and (0, 6) beats (1, 5).
	ids, err = s.Apply(ctx, []Move{mv("a", Read, 1, 2, 300)}, 0)
	require.NoError(t, err)
	require.Equal(t, "", ids[0], "the public read never moves back")
	ids, err = s.Apply(ctx, []Move{mv("a", Read, 1, 5, 300), mv("a", Read, 0, 6, 301)}, 0)
	require.NoError(t, err)
	require.NotEmpty(t, ids[0])
	require.NotEmpty(t, ids[1], "a greater seq of an older epoch moves the public read")
	c, err = s.Count(ctx, "g", 6, "")
	require.NoError(t, err)
	require.Equal(t, int64(2), c.Read)
	require.Equal(t, int64(6), c.LeastRead)

	// A leave: the register says "not a member", so a late move is refused.
	_, err = members.NewStore(nil, s.redis).MergeMemberships(ctx, []channel.Membership{{Key: receipt.Key{User: "b", Channel: "g"}, Member: false, VersionSeq: 1, VersionUnixMs: 1}})
	require.NoError(t, err)
	before, err := s.redis.Client().XLen(ctx, s.StreamKey("g")).Result()
	require.NoError(t, err)
	require.NoError(t, s.Remove(ctx, "g", []string{"b"}, Read, Delivered))
	// b had a read in the view, no delivered: one removal entry, for it.
	tail, err := s.redis.Client().XRevRangeN(ctx, s.StreamKey("g"), "+", "-", 2).Result()
	require.NoError(t, err)
	after, err := s.redis.Client().XLen(ctx, s.StreamKey("g")).Result()
	require.NoError(t, err)
	require.Equal(t, before+1, after, "one removal entry per cursor taken out")
	require.Equal(t, "b", tail[0].Values["u"])
	require.Equal(t, "r", tail[0].Values["k"])
	require.Equal(t, "1", tail[0].Values["rm"])
	require.NotContains(t, tail[0].Values, "s", "a removal carries no position")
	require.NoError(t, s.Remove(ctx, "g", []string{"b"}, Read, Delivered))
	again, err := s.redis.Client().XLen(ctx, s.StreamKey("g")).Result()
	require.NoError(t, err)
	require.Equal(t, after, again, "removing what is not there streams nothing")
	ids, err = s.Apply(ctx, []Move{mv("b", Read, 0, 20, 400)}, 0)
	require.NoError(t, err)
	require.Equal(t, "", ids[0])
	views, err = s.ReadAll(ctx, []string{"g"})
	require.NoError(t, err)
	require.NotContains(t, views[0].Read, "b")
}

func TestChannelViewRebuildDoesNotStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t)
	rdb := s.redis.Client()
	require.NoError(t, s.Rebuild(ctx, []string{"g"}, []Move{{Channel: "g", User: "a", Side: Read, Position: receipt.Position{Seq: 3}, AtUnixMs: 1}}, 60e9))
	n, err := rdb.Exists(ctx, s.StreamKey("g")).Result()
	require.NoError(t, err)
	require.Zero(t, n)
	views, err := s.ReadAll(ctx, []string{"g"})
	require.NoError(t, err)
	require.True(t, views[0].Loaded)
	require.Equal(t, int64(3), views[0].Read["a"].Position.Seq)
}
