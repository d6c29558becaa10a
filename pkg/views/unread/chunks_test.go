package unread

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// wholeAndParts is two stores on one test prefix: one reading every page
// of up to 1,000 channels in one pipeline, the other pages of more than
// chunk channels in parts.
func wholeAndParts(t *testing.T, chunk int) (redis.UniversalClient, *redisstore.Store, Store, Store) {
	t.Helper()
	v, rs, rdb := newTestStore(t)
	return rdb, rs, v.WithChunk(1000), v.WithChunk(chunk)
}

// TestUnreadChunkedSameAnswer reads the same users' pages from two stores
// on one Redis: one reading every page in one pipeline, the other (parts
// of 7 channels) reading the user hashes on three connections at once and
// the heads in parts. The answers must be the same: views, missing heads,
// markers, More, channel order and the levels (a rider), with
// left channels, unknown heads, cursors in some channels only, an
// undecodable head and pages cut.
func TestUnreadChunkedSameAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, rs, whole, parts := wholeAndParts(t, 7)

	channels := setupUnreadUser(t, rs, "u", 60)
	now := time.Now().UnixMilli()
	// Left: channels 3, 20 and 21 (the last two across a part's edge).
	var left []channel.Membership
	for _, i := range []int{3, 20, 21} {
		left = append(left, channel.Leave(receipt.Key{User: "u", Channel: channels[i]}, 2, now))
	}
	_, err := members.NewStore(nil, rs).MergeMemberships(ctx, left)
	require.NoError(t, err)
	// Channel values Redis does not know (14, 15, 59), one it cannot
	// decode (30).
	for _, i := range []int{14, 15, 59} {
		require.NoError(t, rdb.Del(ctx, headkind.NewStore(nil, rs).RedisKey(channels[i])).Err())
	}
	require.NoError(t, rdb.Set(ctx, headkind.NewStore(nil, rs).RedisKey(channels[30]), "?", 0).Err())
	// A cursor without a register, read further in some channels.
	st := receipt.State{Key: receipt.Key{User: "u", Channel: "u-extra"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 2}, MessageID: "m2"}, UpdatedAtUnixMs: now}
	_, err = cursors.NewStore(rs).Merge(ctx, []receipt.State{st})
	require.NoError(t, err)
	var further []receipt.State
	for _, i := range []int{8, 9, 40} {
		further = append(further, receipt.State{Key: receipt.Key{User: "u", Channel: channels[i]}, Read: receipt.Cursor{Position: receipt.Position{Seq: 8}, MessageID: "m8"}, UpdatedAtUnixMs: now + 1})
	}
	_, err = cursors.NewStore(rs).Merge(ctx, further)
	require.NoError(t, err)
	// Deletions: in channels 8 (read further), 12 (a run from the read
	// and a mention) and 13 (everything unread), across a part's edge.
	putDeletions(t, rs, []int64{9, 10}, channels[8])
	putDeletions(t, rs, []int64{6, 7, 8}, channels[12])
	putDeletions(t, rs, []int64{6, 7, 8, 9, 10}, channels[13])
	// A user with no cursor hydrated: CursorsComplete false on both.
	setupUnreadUser(t, rs, "v", 30)
	require.NoError(t, rdb.Del(ctx, cursors.NewStore(rs).RedisKey("v")).Err())

	pages := []Page{{}, {Limit: 1000}, {Limit: 25}, {After: channels[10], Limit: 30}, {After: channels[19]}, {After: "zz"}}
	for _, user := range []string{"u", "v", "nobody"} {
		for _, page := range pages {
			t.Run(fmt.Sprintf("%s/%+v", user, page), func(t *testing.T) {
				want, err := whole.ReadPage(ctx, user, page)
				require.NoError(t, err)
				got, err := parts.ReadPage(ctx, user, page)
				require.NoError(t, err)
				require.Equal(t, want, got)
			})
		}
	}
	// The case the parts are for: they did read in parts, with every
	// kind of channel in the answer.
	v, err := parts.ReadPage(ctx, "u", Page{})
	require.NoError(t, err)
	require.Len(t, v.Channels, 60+1-3)
	require.Equal(t, []string{channels[14], channels[15], channels[30], channels[59], "u-extra"}, v.MissingHeads)
	require.True(t, v.CursorsComplete && v.MembershipsComplete)
	require.False(t, v.More)
	require.Equal(t, []string{channels[14], channels[15], channels[30], channels[59], "u-extra"}, v.MissingDeletions, "a lost or undecodable value's count is unknown")
	byCh := map[string]ChannelView{}
	for _, cv := range v.Channels {
		byCh[cv.Channel] = cv
	}
	for ch, want := range map[string][3]int64{channels[8]: {0, 0, 0}, channels[12]: {2, 9, 1}, channels[13]: {0, 0, 0}, channels[11]: {5, 6, 2}} {
		cv := byCh[ch]
		require.Equal(t, want, [3]int64{cv.Unread, cv.FirstUnread, cv.Mentions}, ch)
	}
}

// TestUnreadReadsMembersOnlyWhenNoneLeft: the default set's membership
// hash is read without its values when it counts no left register, in
// one pipeline and in parts alike. The answer is the one the values give
// (counts, member flags, channels); a channel left is out whether the
// count or the values say so; a count of none while a register says
// "left", which the scripts never leave, shows the values were not read.
func TestUnreadReadsMembersOnlyWhenNoneLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, rs, whole, parts := wholeAndParts(t, 3)
	channels := setupUnreadUser(t, rs, "u", 12)
	left := members.NewStore(nil, rs).UserMembersKey("u")
	type line struct {
		ch                           string
		unread, first, mentions      int64
		member, hasMember, headKnown bool
	}
	read := func(s Store) []line {
		t.Helper()
		v, err := s.ReadPage(ctx, "u", Page{})
		require.NoError(t, err)
		require.True(t, v.MembershipsComplete)
		var out []line
		for _, cv := range v.Channels {
			out = append(out, line{cv.Channel, cv.Unread, cv.FirstUnread, cv.Mentions, cv.Membership.Member, cv.HasMembership, cv.HeadKnown})
		}
		return out
	}
	names := func(ls []line) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.ch)
		}
		return out
	}
	for _, s := range []Store{whole, parts} {
		require.NoError(t, rdb.HSet(ctx, left, members.LeftCountField, "0").Err())
		fieldsOnly := read(s)
		require.Len(t, fieldsOnly, 12)
		require.Equal(t, line{channels[0], 5, 6, 2, true, true, true}, fieldsOnly[0])
		require.NoError(t, rdb.HDel(ctx, left, members.LeftCountField).Err())
		require.Equal(t, read(s), fieldsOnly, "no count: the values read give the same answer")
	}

	require.NoError(t, rdb.HSet(ctx, left, members.LeftCountField, "0").Err())
	require.NoError(t, members.NewStore(nil, rs).ChangeMembership(ctx, channel.Leave(receipt.Key{User: "u", Channel: channels[4]}, 2, time.Now().UnixMilli())).Err)
	want := slices.Delete(slices.Clone(channels), 4, 5)
	for _, s := range []Store{whole, parts} {
		require.Equal(t, "1", rdb.HGet(ctx, left, members.LeftCountField).Val())
		require.Equal(t, want, names(read(s)), "counted: the values read")
		require.NoError(t, rdb.HSet(ctx, left, members.LeftCountField, "0").Err())
		require.Equal(t, channels, names(read(s)), "counted none: fields only")
		require.NoError(t, rdb.HSet(ctx, left, members.LeftCountField, "1").Err())
	}
}

// TestSortByKey holds sortByKey to a plain sort of the keys (distinct,
// as a hash's fields are): prefixes shared or not, keys shorter and
// longer than the 6 bytes compared first, keys that are prefixes of
// others, NUL bytes and bytes above 0x7f; tables small and big enough for
// the radix sort.
func TestSortByKey(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 'a', 'b', 'z', 0x80, 0xff}
	for round := range 300 {
		prefix := strings.Repeat("ch-", rnd.IntN(3))
		seen := map[string]bool{}
		var kvs []redis.KeyValue
		n := rnd.IntN(60)
		if round%4 == 0 {
			n = 200 + rnd.IntN(3000)
		}
		for i := range n {
			b := []byte(prefix)
			for range rnd.IntN(12) {
				b = append(b, alphabet[rnd.IntN(len(alphabet))])
			}
			if !seen[string(b)] {
				seen[string(b)] = true
				kvs = append(kvs, redis.KeyValue{Key: string(b), Value: strconv.Itoa(i)})
			}
		}
		want := slices.Clone(kvs)
		slices.SortFunc(want, func(a, b redis.KeyValue) int { return strings.Compare(a.Key, b.Key) })
		sortByKey(kvs)
		require.Equal(t, want, kvs, "round %d", round)
	}
}

// BenchmarkSortByKey sorts a 10,000-channel user's hash as Redis answers
// it (in no order).
func BenchmarkSortByKey(b *testing.B) {
	rnd := rand.New(rand.NewPCG(1, 2))
	kvs := make([]redis.KeyValue, 10000)
	for i := range kvs {
		kvs[i] = redis.KeyValue{Key: fmt.Sprintf("team-42-channel-%06d", i), Value: "1"}
	}
	rnd.Shuffle(len(kvs), func(i, j int) { kvs[i], kvs[j] = kvs[j], kvs[i] })
	work := make([]redis.KeyValue, len(kvs))
	for b.Loop() {
		copy(work, kvs)
		sortByKey(work)
	}
}
