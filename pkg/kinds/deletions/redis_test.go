package deletions

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// newRedisStore is the kind's store on a Redis of the test's own prefix
// (no Postgres), that driver and its client.
func newRedisStore(t testing.TB) (Store, *redisstore.Store, redis.UniversalClient) {
	t.Helper()
	rs := kindtest.Redis(t, Scripts...)
	return NewStore(nil, rs), rs, rs.Client()
}

// hashTag is a key's hash tag, which decides its cluster slot.
func hashTag(key string) string {
	_, rest, _ := strings.Cut(key, "{")
	tag, _, _ := strings.Cut(rest, "}")
	return tag
}

// A thread's deleted replies are a set beside its channel's, in the
// channel's slot: unknown until hydrated or kept, then counted as the
// rule says (channel.UnreadDeleted, channel.MentionCountDeleted); the
// channel's set and the channel scan do not see them, the set scan does.
func TestThreadDeletionSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rs, rdb := newRedisStore(t)
	th, other := thread.Ref{Channel: "x", Root: 4}, thread.Ref{Channel: "x", Root: 9}
	for _, k := range []string{s.RedisKey(thread.Ref{Channel: "x"}), s.RedisKey(th), s.CountKey(th)} {
		require.Equal(t, hashTag(headkind.NewStore(nil, rs).RedisKey("x")), hashTag(k), "the channel's slot: %s", k)
	}

	_, err := s.AddRedis(ctx, []channel.Deletions{{Channel: "x", Root: 4, Seqs: []int64{3}}, {Channel: "x", Seqs: []int64{8}}})
	require.NoError(t, err)
	q := []Query{{Ref: th, Read: 1, Head: 6, Mentions: []int64{2, 3}}, {Ref: other, Read: 1, Head: 6}}
	got, err := s.CountRedis(ctx, q)
	require.NoError(t, err)
	require.Equal(t, []Count{{}, {}}, got, "not hydrated: unknown")

	require.NoError(t, s.HydrateRedis(ctx, []thread.Ref{th, other}, []channel.Deletions{{Channel: "x", Root: 4, Seqs: []int64{2}}}))
	for range 2 { // a repeated delete changes nothing
		_, err = s.AddRedis(ctx, []channel.Deletions{{Channel: "x", Root: 4, Seqs: []int64{3}}})
		require.NoError(t, err)
		got, err = s.CountRedis(ctx, q)
		require.NoError(t, err)
		require.Equal(t, Count{Known: true, Deleted: 2, FirstKept: 4, DeletedMentions: []int64{2, 3}}, got[0])
		require.Equal(t, Count{Known: true, FirstKept: 2}, got[1], "a hydrated thread without deletions")
	}

	sets, err := s.ReadRedis(ctx, []thread.Ref{{Channel: "x"}, th, other})
	require.NoError(t, err)
	require.Equal(t, [][]int64{{8}, {2, 3}, nil}, sets)
	// Every SCAN page: the test's keys share the Redis database with the
	// other packages' tests, so one page may hold none of them.
	var chs []string
	for cur := (redisstore.ScanCursor{}); !cur.Done(); {
		var page []string
		page, cur, err = rs.ScanTagged(ctx, keyTag, cur, 1000)
		require.NoError(t, err)
		chs = append(chs, page...)
	}
	require.Equal(t, []string{"x"}, chs, "a thread's set is not its channel's")
	var refs []thread.Ref
	for cur := (redisstore.ScanCursor{}); !cur.Done(); {
		var page []thread.Ref
		page, cur, err = s.ScanRedisSets(ctx, cur, 1000)
		require.NoError(t, err)
		refs = append(refs, page...)
	}
	require.ElementsMatch(t, []thread.Ref{{Channel: "x"}, th}, refs)

	// A lost set whose count says it had some is unknown again.
	require.NoError(t, rdb.Del(ctx, s.RedisKey(th)).Err())
	got, err = s.CountRedis(ctx, q[:1])
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
	s, _, rdb := newRedisStore(t)
	th := thread.Ref{Channel: "wedge", Root: 1}
	const read, deleted, head = 9007199254740991, 9007199254740992, 9007199254741002
	require.NoError(t, rdb.ZAdd(ctx, s.RedisKey(th), redis.Z{Score: deleted, Member: "9007199254740992"}).Err())
	require.NoError(t, rdb.Set(ctx, s.CountKey(th), "1", 0).Err())
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.CountRedis(cctx, []Query{{Ref: th, Read: read, Head: head}})
	require.NoError(t, err, "the count ends")
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.NoError(t, rdb.Ping(pctx).Err(), "Redis answers within a second")
}
