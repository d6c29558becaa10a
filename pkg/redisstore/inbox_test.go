package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// A head raise keeps its message's id among the channel's newest
// MessageIDsKept (late notices too), trimmed in steps.
func TestMessageIDsKept(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := context.Background()
	n := MessageIDsKept + MessageIDsKept/10 + 50
	var heads []channel.Head
	for q := n; q >= 1; q-- { // newest first: every notice but one is late
		heads = append(heads, channel.Head{Channel: "c", Seq: int64(q), MessageID: fmt.Sprintf("m%d", q), UpdatedAtUnixMs: int64(q)})
	}
	for i := 0; i < len(heads); i += 100 {
		_, err := s.RaiseHeads(ctx, heads[i:min(i+100, len(heads))])
		require.NoError(t, err)
	}
	size := s.rdb.ZCard(ctx, s.MessageIDsKey("c")).Val()
	require.LessOrEqual(t, size, int64(MessageIDsKept+MessageIDsKept/10), "trimmed")
	ids, err := s.MessageIDs(ctx, []MessageRef{{"c", 0, int64(n)}, {"c", 0, int64(n - 900)}, {"c", 0, 0}, {"other", 0, 1}})
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("m%d", n), fmt.Sprintf("m%d", n-900), "", ""}, ids)
}

// A thread head's reply id, remembered after its raise
// (pkg/kinds/threads), is kept among the thread's newest MessageIDsKept,
// apart from the channel's ids and other threads'.
func TestReplyIDsKept(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := context.Background()
	n := MessageIDsKept + 20
	ref := thread.Ref{Channel: "c", Root: 7}
	var heads []thread.Head
	for q := 1; q <= n; q++ {
		heads = append(heads, thread.Head{Ref: ref, Seq: int64(q), MessageID: fmt.Sprintf("r%d", q), UpdatedAtUnixMs: int64(q)})
	}
	heads = append(heads, thread.Head{Ref: thread.Ref{Channel: "c", Root: 8}, Seq: 1, MessageID: "other"})
	for i := 0; i < len(heads); i += 100 {
		require.NoError(t, s.RememberReplyIDs(ctx, heads[i:min(i+100, len(heads))]))
	}
	require.Equal(t, int64(MessageIDsKept), s.rdb.ZCard(ctx, s.threadMessageIDsKey(ref)).Val(), "trimmed to the newest")
	ids, err := s.MessageIDs(ctx, []MessageRef{{"c", 7, int64(n)}, {"c", 7, 21}, {"c", 7, 20}, {"c", 8, 1}, {"c", 0, 1}})
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("r%d", n), "r21", "", "other", ""}, ids, "the oldest trimmed; threads and the channel apart")
}

// A membership hash made by this build counts its left registers (":l")
// through merges in any order, API joins and leaves, hydration and
// erasure; a hash an older build made (no count) never gains a wrong one.
func TestLeftCountKeptByEveryWrite(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(3, 4))
	leftIn := func(user string) (int, string) {
		all := s.rdb.HGetAll(ctx, s.UserMembersKey(user)).Val()
		n := 0
		for f, v := range all {
			if !strings.HasPrefix(f, ":") && strings.HasPrefix(v, "0") {
				n++
			}
		}
		return n, all[leftCountField]
	}
	register := func(user string) channel.Membership {
		k := receipt.Key{User: user, Channel: fmt.Sprintf("c%d", rnd.IntN(12))}
		if rnd.IntN(2) == 0 {
			return channel.Leave(k, rnd.Int64N(5), rnd.Int64N(5))
		}
		return channel.Join(k, rnd.Int64N(5), rnd.Int64N(5), rnd.Int64N(3))
	}
	// An older build's hash: a left register and no count.
	require.NoError(t, s.rdb.HSet(ctx, s.UserMembersKey("old"), "c0", "0 1 1 0").Err())
	// A user hydrated with no register at all: the hash is made counted.
	HydrateMembershipsAndMentions(t, s, "empty", nil, channel.MentionCapDefault)
	for step := range 400 {
		for _, user := range []string{"u", "old", "empty"} {
			switch rnd.IntN(3) {
			case 0:
				_, err := s.MergeMemberships(ctx, []channel.Membership{register(user), register(user)})
				require.NoError(t, err)
			case 1:
				require.NoError(t, s.ChangeMembership(ctx, register(user)).Err)
			default:
				HydrateMembershipsAndMentions(t, s, user, []channel.Membership{register(user)}, channel.MentionCapDefault)
			}
			n, count := leftIn(user)
			if user == "old" {
				require.Empty(t, count, "step %d: an older build's hash has no count", step)
				continue
			}
			require.Equal(t, strconv.Itoa(n), count, "step %d", step)
		}
	}
	_, err := s.Erase(ctx, "u", time.Now().UnixMilli(), 0, nil, nil)
	require.NoError(t, err)
	n, count := leftIn("u")
	require.Equal(t, "0", count)
	require.Zero(t, n)
}
