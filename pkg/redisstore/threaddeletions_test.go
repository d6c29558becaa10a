package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/thread"
)

// A thread's deleted replies are a set beside its channel's, in the
// channel's slot: unknown until hydrated or kept, then counted as the
// rule says (channel.UnreadDeleted, channel.MentionCountDeleted); the
// channel's set and the channel scan do not see them, the set scan does.
func TestThreadDeletionSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := New(rdb, Config{Prefix: redistest.Prefix(t, rdb)})
	th, other := thread.Ref{Channel: "x", Root: 4}, thread.Ref{Channel: "x", Root: 9}
	require.Equal(t, keySlot(s.DeletionsKey("x")), keySlot(s.SetDeletionsKey(th)), "the channel's slot")
	require.Equal(t, keySlot(s.DeletionsKey("x")), keySlot(s.SetDeletionCountKey(th)))

	_, err := s.AddDeletions(ctx, []channel.Deletions{{Channel: "x", Root: 4, Seqs: []int64{3}}, {Channel: "x", Seqs: []int64{8}}})
	require.NoError(t, err)
	q := []SetDeletionQuery{{Ref: th, Read: 1, Head: 6, Mentions: []int64{2, 3}}, {Ref: other, Read: 1, Head: 6}}
	got, err := s.DeletionCountsOf(ctx, q)
	require.NoError(t, err)
	require.Equal(t, []SetDeletionCount{{}, {}}, got, "not hydrated: unknown")

	require.NoError(t, s.HydrateDeletionSets(ctx, []thread.Ref{th, other}, []channel.Deletions{{Channel: "x", Root: 4, Seqs: []int64{2}}}))
	for range 2 { // a repeated delete changes nothing
		_, err = s.AddDeletions(ctx, []channel.Deletions{{Channel: "x", Root: 4, Seqs: []int64{3}}})
		require.NoError(t, err)
		got, err = s.DeletionCountsOf(ctx, q)
		require.NoError(t, err)
		require.Equal(t, SetDeletionCount{Known: true, Deleted: 2, FirstKept: 4, DeletedMentions: []int64{2, 3}}, got[0])
		require.Equal(t, SetDeletionCount{Known: true, FirstKept: 2}, got[1], "a hydrated thread without deletions")
	}

	sets, err := s.DeletionSets(ctx, []thread.Ref{{Channel: "x"}, th, other})
	require.NoError(t, err)
	require.Equal(t, [][]int64{{8}, {2, 3}, nil}, sets)
	chs, _, err := s.ScanDeletionChannels(ctx, ScanCursor{}, 1000)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, chs)
	var refs []thread.Ref
	for cur := (ScanCursor{}); !cur.Done(); {
		var page []thread.Ref
		page, cur, err = s.ScanDeletionSets(ctx, cur, 1000)
		require.NoError(t, err)
		refs = append(refs, page...)
	}
	require.ElementsMatch(t, []thread.Ref{{Channel: "x"}, th}, refs)

	// A lost set whose count says it had some is unknown again.
	require.NoError(t, rdb.Del(ctx, s.SetDeletionsKey(th)).Err())
	got, err = s.DeletionCountsOf(ctx, q[:1])
	require.NoError(t, err)
	require.False(t, got[0].Known)
}

// Values past 2^53 are refused where they enter, but one that slipped
// into Redis (a store written by hand, an older version) cannot spin the
// deletion count: at 2^53 the doubles of Lua no longer halve, and the
// search is bounded by its step count. Redis keeps answering.
func TestDeletionCountPastExactSeqsEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := New(rdb, Config{Prefix: redistest.Prefix(t, rdb)})
	th := thread.Ref{Channel: "wedge", Root: 1}
	const read, deleted, head = 9007199254740991, 9007199254740992, 9007199254741002
	require.NoError(t, rdb.ZAdd(ctx, s.SetDeletionsKey(th), redis.Z{Score: deleted, Member: "9007199254740992"}).Err())
	require.NoError(t, rdb.Set(ctx, s.SetDeletionCountKey(th), "1", 0).Err())
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.DeletionCountsOf(cctx, []SetDeletionQuery{{Ref: th, Read: read, Head: head}})
	require.NoError(t, err, "the count ends")
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.NoError(t, rdb.Ping(pctx).Err(), "Redis answers within a second")
}
