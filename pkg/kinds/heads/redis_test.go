package heads_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

func newRedis(t *testing.T) heads.Store {
	return heads.NewStore(nil, kindtest.Redis(t, heads.Scripts...))
}

// raise.lua agrees with channel.MergeHead at any seq (past 2^53, near
// the int64 bound: compared as base-62 strings, never as Lua numbers):
// random heads in random orders with duplicates end where the Go fold
// does, and each raise says whether it advanced.
func TestRaiseMatchesTheRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newRedis(t)
	rng := rand.New(rand.NewPCG(9, 10))
	bases := []int64{0, 60, 1<<53 - 5, math.MaxInt64 - 40}
	for trial := range 60 {
		base := bases[trial%len(bases)]
		ch := "c" + strconv.Itoa(trial)
		n := 1 + rng.IntN(8)
		hs := make([]channel.Head, n)
		for i := range n {
			q := base + 1 + rng.Int64N(30)
			hs[i] = channel.Head{Channel: ch, Seq: q, MessageID: "m" + strconv.FormatInt(q, 10), UpdatedAtUnixMs: rng.Int64N(5)}
		}
		order := kindtest.Replay(rng, n)
		var want channel.Head
		for _, i := range order {
			var adv bool
			want, adv = channel.MergeHead(want, hs[i])
			hr, err := s.RaiseRedis(ctx, []channel.Head{hs[i]})
			require.NoError(t, err)
			require.NoError(t, hr[0].Err)
			require.Equal(t, adv, hr[0].Advanced)
			require.Equal(t, want, hr[0].Head, "trial %d", trial)
		}
		got, err := s.ReadRedis(ctx, []string{ch})
		require.NoError(t, err)
		require.Equal(t, want, got[ch])
	}
}

// A hydrate records the channels known to have no head (a read then needs
// no Postgres); a real head beats that record; the scan finds every
// channel with a value.
func TestHydrateAndScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newRedis(t)
	require.NoError(t, s.HydrateRedis(ctx, []channel.Head{{Channel: "a", Seq: 4, MessageID: "m4", UpdatedAtUnixMs: 1}}, []string{"none", "later"}))
	_, err := s.RaiseRedis(ctx, []channel.Head{{Channel: "later", Seq: 2, UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	got, err := s.ReadRedis(ctx, []string{"a", "none", "later", "unknown"})
	require.NoError(t, err)
	require.Equal(t, map[string]channel.Head{
		"a":     {Channel: "a", Seq: 4, MessageID: "m4", UpdatedAtUnixMs: 1},
		"none":  {Channel: "none"},
		"later": {Channel: "later", Seq: 2, UpdatedAtUnixMs: 1},
	}, got, "unknown is absent: read Postgres")

	var chs []string
	for cur := (redisstore.ScanCursor{}); !cur.Done(); {
		page, next, err := s.ScanRedis(ctx, cur, 1000)
		require.NoError(t, err)
		chs, cur = append(chs, page...), next
	}
	require.ElementsMatch(t, []string{"a", "none", "later"}, chs)
}

// A head raise keeps its message's id among the channel's newest
// MessageIDsKept (late notices too), trimmed in steps.
func TestMessageIDsKept(t *testing.T) {
	t.Parallel()
	rs := kindtest.Redis(t, heads.Scripts...)
	s := heads.NewStore(nil, rs)
	ctx := context.Background()
	n := heads.MessageIDsKept + heads.MessageIDsKept/10 + 50
	var hs []channel.Head
	for q := n; q >= 1; q-- { // newest first: every notice but one is late
		hs = append(hs, channel.Head{Channel: "c", Seq: int64(q), MessageID: fmt.Sprintf("m%d", q), UpdatedAtUnixMs: int64(q)})
	}
	for i := 0; i < len(hs); i += 100 {
		_, err := s.RaiseRedis(ctx, hs[i:min(i+100, len(hs))])
		require.NoError(t, err)
	}
	size := rs.Client().ZCard(ctx, s.MessageIDsKey("c")).Val()
	require.LessOrEqual(t, size, int64(heads.MessageIDsKept+heads.MessageIDsKept/10), "trimmed")
	ids, err := s.MessageIDs(ctx, []heads.MessageRef{{"c", 0, int64(n)}, {"c", 0, int64(n - 900)}, {"c", 0, 0}, {"other", 0, 1}})
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("m%d", n), fmt.Sprintf("m%d", n-900), "", ""}, ids)
}

// A thread head's reply id, remembered after its raise
// (pkg/kinds/threads), is kept among the thread's newest MessageIDsKept,
// apart from the channel's ids and other threads'.
func TestReplyIDsKept(t *testing.T) {
	t.Parallel()
	rs := kindtest.Redis(t, heads.Scripts...)
	s := heads.NewStore(nil, rs)
	ctx := context.Background()
	n := heads.MessageIDsKept + 20
	ref := thread.Ref{Channel: "c", Root: 7}
	var hs []thread.Head
	for q := 1; q <= n; q++ {
		hs = append(hs, thread.Head{Ref: ref, Seq: int64(q), MessageID: fmt.Sprintf("r%d", q), UpdatedAtUnixMs: int64(q)})
	}
	hs = append(hs, thread.Head{Ref: thread.Ref{Channel: "c", Root: 8}, Seq: 1, MessageID: "other"})
	for i := 0; i < len(hs); i += 100 {
		require.NoError(t, s.RememberReplyIDs(ctx, hs[i:min(i+100, len(hs))]))
	}
	require.Equal(t, int64(heads.MessageIDsKept), rs.Client().ZCard(ctx, s.MessageIDsKey("c")+":7").Val(), "trimmed to the newest")
	ids, err := s.MessageIDs(ctx, []heads.MessageRef{{"c", 7, int64(n)}, {"c", 7, 21}, {"c", 7, 20}, {"c", 8, 1}, {"c", 0, 1}})
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("r%d", n), "r21", "", "other", ""}, ids, "the oldest trimmed; threads and the channel apart")
}
