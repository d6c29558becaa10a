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
// MessageIDsKept (late notices too), trimmed in steps; InboxOrder reads a
// user's channels with their heads, complete only when Redis holds them.
func TestMessageIDsKeptAndInboxOrder(t *testing.T) {
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

	// InboxOrder: the channels of a user's hashes, with their heads.
	_, err = s.Merge(ctx, []receipt.State{{Key: receipt.Key{User: "u", Channel: "c"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 1}}, UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	got, err := s.InboxOrder(ctx, "u")
	require.NoError(t, err)
	require.False(t, got.Complete, "the user's hashes were never hydrated")
	require.Equal(t, []channel.Head{{Channel: "c", Seq: int64(n), MessageID: fmt.Sprintf("m%d", n), UpdatedAtUnixMs: int64(n)}}, got.Heads)
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

// InboxOrder leaves out the channels a user left: read without the
// registers' values when the hash counts no left register, with them when
// it counts some or has no count (an older build's hash).
func TestInboxOrderLeavesLeftChannelsOut(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := context.Background()
	var regs []channel.Membership
	var heads []channel.Head
	for i := range 5 {
		ch := fmt.Sprintf("c%d", i)
		regs = append(regs, channel.Join(receipt.Key{User: "u", Channel: ch}, 1, 1, 0))
		heads = append(heads, channel.Head{Channel: ch, Seq: 3, MessageID: "m3", UpdatedAtUnixMs: int64(10 + i)})
	}
	HydrateMembershipsAndMentions(t, s, "u", regs, channel.MentionCapDefault)
	_, err := s.RaiseHeads(ctx, heads)
	require.NoError(t, err)
	channelsOf := func() []string {
		t.Helper()
		got, err := s.InboxOrder(ctx, "u")
		require.NoError(t, err)
		var out []string
		for _, h := range got.Heads {
			out = append(out, h.Channel)
		}
		return out
	}
	require.Equal(t, "0", s.rdb.HGet(ctx, s.UserMembersKey("u"), leftCountField).Val())
	require.Equal(t, []string{"c0", "c1", "c2", "c3", "c4"}, channelsOf())

	require.NoError(t, s.ChangeMembership(ctx, channel.Leave(receipt.Key{User: "u", Channel: "c1"}, 2, 2)).Err)
	require.Equal(t, "1", s.rdb.HGet(ctx, s.UserMembersKey("u"), leftCountField).Val())
	require.Equal(t, []string{"c0", "c2", "c3", "c4"}, channelsOf(), "counted: the values read")

	require.NoError(t, s.rdb.HDel(ctx, s.UserMembersKey("u"), leftCountField).Err())
	require.Equal(t, []string{"c0", "c2", "c3", "c4"}, channelsOf(), "no count: the values read")

	// A count that says none while a register says left cannot be: it
	// shows the values are not read then.
	require.NoError(t, s.rdb.HSet(ctx, s.UserMembersKey("u"), leftCountField, "0").Err())
	require.Equal(t, []string{"c0", "c1", "c2", "c3", "c4"}, channelsOf(), "counted none: fields only")
}
