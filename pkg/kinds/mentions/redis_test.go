package mentions

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// newRedisStore is the kind's store on a Redis of the test's own prefix
// (no Postgres), and that driver.
func newRedisStore(t *testing.T) (Store, *redisstore.Store) {
	t.Helper()
	rs := kindtest.Redis(t, Scripts...)
	return NewStore(nil, rs), rs
}

// add.lua keeps what channel.MergeMentions keeps, at every magnitude of
// seq (the padded members sort as the numbers do up to math.MaxInt64):
// random seqs in random orders with duplicates end where the Go fold does.
func TestRedisKeepsWhatMergeMentionsKeeps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newRedisStore(t)
	rng := rand.New(rand.NewPCG(9, 10))
	const capN = 3
	s = s.WithMentionCap(capN)
	bases := []int64{0, 60, 1<<53 - 5, math.MaxInt64 - 40}
	for trial := range 60 {
		base := bases[trial%len(bases)]
		k := receipt.Key{User: "u" + strconv.Itoa(trial%5), Channel: "c" + strconv.Itoa(trial)}
		n := 1 + rng.IntN(8)
		mentions := make([][]int64, n)
		for i := range n {
			for range rng.IntN(4) {
				mentions[i] = append(mentions[i], base+1+rng.Int64N(12))
			}
		}
		order := kindtest.Replay(rng, n)
		var want []int64
		for _, i := range order {
			want = channel.MergeMentions(want, mentions[i], capN)
			require.NoError(t, s.AddRedis(ctx, []channel.Mentions{{Key: k, Seqs: mentions[i]}}))
		}
		got, err := s.ReadRedis(ctx, []receipt.Key{k})
		require.NoError(t, err)
		require.Equal(t, want, got[0], "trial %d", trial)
	}
}

// A user's hash reads whole and is complete only once hydrated; the
// sweep's scan finds the users with one, ids with ':' and '%' among them,
// whole.
func TestRedisReadsScansAndHydrates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newRedisStore(t)
	const alice, room = "@alice:example.org", "!room:example.org"
	k := receipt.Key{User: alice, Channel: room}
	require.NoError(t, s.AddRedis(ctx, []channel.Mentions{{Key: k, Seqs: []int64{5}}}))
	ms, complete, err := s.UserRedis(ctx, alice)
	require.NoError(t, err)
	require.False(t, complete, "never hydrated")
	require.Equal(t, []channel.Mentions{{Key: k, Seqs: []int64{5}}}, ms)

	bob := receipt.Key{User: "urn:tenant:b%2F/#b", Channel: room}
	require.NoError(t, s.HydrateRedis(ctx, bob.User, []channel.Mentions{{Key: bob, Seqs: []int64{2, 3}}}))
	ms, complete, err = s.UserRedis(ctx, bob.User)
	require.NoError(t, err)
	require.True(t, complete)
	require.Equal(t, []channel.Mentions{{Key: bob, Seqs: []int64{2, 3}}}, ms)

	var users []string
	for cur := (redisstore.ScanCursor{}); !cur.Done(); {
		page, next, err := s.ScanRedisUsers(ctx, cur, 1000)
		require.NoError(t, err)
		users, cur = append(users, page...), next
	}
	require.ElementsMatch(t, []string{alice, bob.User}, users)
}

// An erasure (the driver's script, with the kind's hash as
// kind.ErasedHashes names it) leaves the user's hash empty and complete
// and another user's alone; a mention added after it reads the new
// generation, so its event is ordered after the erasure.
func TestRedisErasure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rs := newRedisStore(t)
	gone, kept := receipt.Key{User: "gone", Channel: "c*2"}, receipt.Key{User: "gone*", Channel: "c*2"}
	gens, err := s.AddRedisReadingGenerations(ctx, []channel.Mentions{{Key: gone, Seqs: []int64{3}}, {Key: kept, Seqs: []int64{3}}, {Key: gone}})
	require.NoError(t, err)
	require.Equal(t, []int64{redisstore.GenerationUnknown, redisstore.GenerationUnknown, 0}, gens, "no tombstone yet; an entry without seqs is not written")

	ts, err := rs.Erase(ctx, "gone", 1_000, 0, kind.ErasedHashes([]kind.Kind{Kind}, &kind.Env{Redis: rs}, "gone"), nil)
	require.NoError(t, err)
	ms, complete, err := s.UserRedis(ctx, "gone")
	require.NoError(t, err)
	require.Empty(t, ms)
	require.True(t, complete, "an erased user's hash is complete, so reads do not fall back to Postgres")
	seqs, err := s.ReadRedis(ctx, []receipt.Key{kept})
	require.NoError(t, err)
	require.Equal(t, [][]int64{{3}}, seqs, "another user's mentions stay")

	gens, err = s.AddRedisReadingGenerations(ctx, []channel.Mentions{{Key: gone, Seqs: []int64{4}}})
	require.NoError(t, err)
	require.Equal(t, []int64{ts.Generation}, gens)
}
