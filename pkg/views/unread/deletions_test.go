package unread

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// The view counts a channel's deletions from the deletion kind's set:
// these tests write the set with the kind and read the view.

// counts reads user's unread view of channels: per channel the unread
// count, the first unread seq and the mention count.
func counts(t testing.TB, s Store, user string, channels ...string) (map[string][3]int64, UnreadView) {
	t.Helper()
	v, err := s.Read(context.Background(), user, channels)
	require.NoError(t, err)
	out := map[string][3]int64{}
	for _, cv := range v.Channels {
		out[cv.Channel] = [3]int64{cv.Unread, cv.FirstUnread, cv.Mentions}
	}
	return out, v
}

// newDeletionStore is the view and the deletion kind on a Redis of the
// test's own prefix, that driver and its client.
func newDeletionStore(tb testing.TB) (Store, deletions.Store, *redisstore.Store, redis.UniversalClient) {
	tb.Helper()
	v, rs, rdb := newTestStore(tb)
	return v, deletions.NewStore(nil, rs), rs, rdb
}

// Deleted seqs leave the unread count, the first unread seq and the
// mention count as the rule says (channel.UnreadDeleted,
// channel.MentionCountDeleted); a repeat changes nothing.
func TestUnreadWithDeletions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, d, s, rdb := newDeletionStore(t)
	chs := setupUnreadUser(t, s, "u", 4) // read 5, mentions 7 and 9, head 10
	dels := []channel.Deletions{{Channel: chs[0], Seqs: []int64{7, 9}}, {Channel: chs[1], Seqs: []int64{6, 7, 8}},
		{Channel: chs[2], Seqs: []int64{6, 7, 8, 9, 10}}, {Channel: chs[3], Seqs: []int64{2, 3, 11}}}
	got, v := counts(t, u, "u", chs...)
	require.Empty(t, v.MissingDeletions)
	for _, ch := range chs {
		require.Equal(t, [3]int64{5, 6, 2}, got[ch])
	}
	for range 2 {
		errs, err := d.AddRedis(ctx, dels)
		require.NoError(t, err)
		require.Equal(t, make([]error, len(dels)), errs)
		got, v = counts(t, u, "u", chs...)
		require.Empty(t, v.MissingDeletions)
		st := receipt.State{Read: receipt.Cursor{Position: receipt.Position{Seq: 5}}}
		for _, d := range dels {
			n, first := channel.UnreadDeleted(10, st, d.Seqs)
			m, _ := channel.MentionCountDeleted([]int64{7, 9}, 5, channel.MentionCapDefault, d.Seqs)
			require.Equal(t, [3]int64{n, first, m}, got[d.Channel], d.Channel)
		}
	}
	require.Equal(t, [3]int64{5, 6, 2}, got[chs[3]], "deletions outside (read, head] change nothing")
	seqs, err := d.ReadRedis(ctx, channelRefs(chs[1], "nowhere"))
	require.NoError(t, err)
	require.Equal(t, [][]int64{{6, 7, 8}, nil}, seqs)

	// The set lost while its count says it had some: unknown, not none.
	require.NoError(t, rdb.Del(ctx, d.RedisKey(thread.Ref{Channel: chs[0]})).Err())
	_, v = counts(t, u, "u", chs...)
	require.Equal(t, []string{chs[0]}, v.MissingDeletions)
}

// A delete that arrives before Redis knows the channel's deletions (and
// before its message's notice) is kept: hydrating adds Postgres's to it,
// and the count then holds both.
func TestDeleteBeforeNoticeAndHydrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, d, s, rdb := newDeletionStore(t)
	_, err := d.AddRedis(ctx, []channel.Deletions{{Channel: "x", Seqs: []int64{3}}})
	require.NoError(t, err)
	_, err = headkind.NewStore(nil, s).RaiseRedis(ctx, []channel.Head{{Channel: "x", Seq: 5, MessageID: "m5"}})
	require.NoError(t, err)
	_, v := counts(t, u, "u", "x")
	require.Equal(t, []string{"x"}, v.MissingDeletions, "not hydrated: unknown")
	require.NoError(t, d.HydrateRedis(ctx, channelRefs("x"), []channel.Deletions{{Channel: "x", Seqs: []int64{1}}}))
	got, v := counts(t, u, "u", "x")
	require.Empty(t, v.MissingDeletions)
	require.Equal(t, [3]int64{3, 2, 0}, got["x"])
	f := strings.Fields(rdb.Get(ctx, headkind.NewStore(nil, s).RedisKey("x")).Val())
	require.Len(t, f, 5)
	require.Equal(t, "2", f[3], "the count kept in the channel value's fourth part")
}

// fillDeletions puts n consecutive deletions 1..n into ch's set (a
// pipeline of ZADDs) and marks its count.
func fillDeletions(tb testing.TB, d deletions.Store, rdb redis.UniversalClient, ch string, n int64) {
	tb.Helper()
	ctx := context.Background()
	const batch = 10000
	for lo := int64(1); lo <= n; lo += batch {
		pipe := rdb.Pipeline()
		zs := make([]redis.Z, 0, batch)
		for q := lo; q < lo+batch && q <= n; q++ {
			zs = append(zs, redis.Z{Score: float64(q), Member: q})
		}
		pipe.ZAdd(ctx, d.RedisKey(thread.Ref{Channel: ch}), zs...)
		_, err := pipe.Exec(ctx)
		require.NoError(tb, err)
	}
	require.NoError(tb, d.HydrateRedis(ctx, channelRefs(ch), nil))
}

// A channel with a million deletions, a run of them right after the read:
// the count and the first unread seq are exact (the run is searched, not
// walked: BenchmarkCountDeletions shows the time flat from 1,000).
func TestMillionDeletions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, d, s, rdb := newDeletionStore(t)
	const n = 1_000_000
	fillDeletions(t, d, rdb, "big", n)
	_, err := headkind.NewStore(nil, s).RaiseRedis(ctx, []channel.Head{{Channel: "big", Seq: n + 10, MessageID: "m"}})
	require.NoError(t, err)
	got, _ := counts(t, u, "u", "big")
	require.Equal(t, [3]int64{10, n + 1, 0}, got["big"])
	// A hole in the run.
	require.NoError(t, rdb.ZRem(ctx, d.RedisKey(thread.Ref{Channel: "big"}), 777_777).Err())
	got, _ = counts(t, u, "u", "big")
	require.Equal(t, [3]int64{11, 777_777, 0}, got["big"])
}

// BenchmarkCountDeletions reads one user's counts in a channel whose
// unread messages start with a run of all its deletions (1,000 and
// 1,000,000): the search costs O(log(run) log n), so the two take about
// the same time.
//
//	go test -run '^$' -bench CountDeletions ./pkg/views/unread/
func BenchmarkCountDeletions(b *testing.B) {
	u, d, s, rdb := newDeletionStore(b)
	ctx := context.Background()
	for _, n := range []int64{1000, 1_000_000} {
		ch := fmt.Sprintf("c%d", n)
		fillDeletions(b, d, rdb, ch, n)
		_, err := headkind.NewStore(nil, s).RaiseRedis(ctx, []channel.Head{{Channel: ch, Seq: n + 10, MessageID: "m"}})
		require.NoError(b, err)
		b.Run(fmt.Sprintf("deletions=%d", n), func(b *testing.B) {
			for b.Loop() {
				got, err := u.Read(ctx, "u", []string{ch})
				if err != nil || got.Channels[0].Unread != 10 {
					b.Fatal(err, got.Channels)
				}
			}
		})
	}
}
