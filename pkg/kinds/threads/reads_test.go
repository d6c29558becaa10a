package threads

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// The registers come with the user's memberships of their channels (of
// the filtered channel only, when filtered), each channel once, in chunks
// past a thousand channels; the completeness of each hash is its own.
func TestUserThreadsWithMemberships(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	follow := func(user, ch string, root int64) thread.State {
		return thread.State{Key: tkey(user, ch, root), Follow: thread.Follow{Following: true, VersionUnixMs: 1}}
	}
	_, err := s.MergeStates(ctx, []thread.State{follow("u1", "c1", 1), follow("u1", "c1", 2), follow("u1", "c10", 1), follow("u1", "c2", 1)})
	require.NoError(t, err)
	join := func(user, ch string) channel.Membership {
		return channel.Join(receipt.Key{User: user, Channel: ch}, 1, 1, 0)
	}
	hydrateMemberships(t, s, "u1", []channel.Membership{join("u1", "c1"), join("u1", "c10"), join("u1", "other")})

	r, err := s.UserThreadsWithMemberships(ctx, "u1", "")
	require.NoError(t, err)
	require.False(t, r.Complete)
	require.True(t, r.MembershipsComplete)
	require.Len(t, r.States, 4)
	got := map[string]bool{}
	for _, m := range r.Memberships {
		require.False(t, got[m.Key.Channel], "a channel once")
		got[m.Key.Channel] = m.Member
	}
	require.Equal(t, map[string]bool{"c1": true, "c10": true}, got, "the channels of the registers only; c2 has no membership")

	r, err = s.UserThreadsWithMemberships(ctx, "u1", "c1")
	require.NoError(t, err)
	require.Len(t, r.States, 2)
	require.Len(t, r.Memberships, 1)
	require.Equal(t, "c1", r.Memberships[0].Key.Channel)

	require.NoError(t, s.HydrateUser(ctx, "u1", nil, redisstore.Incarnation{}))
	r, err = s.UserThreadsWithMemberships(ctx, "u1", "")
	require.NoError(t, err)
	require.True(t, r.Complete)
	states, complete, err := s.UserThreads(ctx, "u1", "")
	require.NoError(t, err)
	require.True(t, complete)
	require.ElementsMatch(t, r.States, states, "the same registers as UserThreads")

	// A user without hashes: nothing, nothing complete.
	r, err = s.UserThreadsWithMemberships(ctx, "nobody", "")
	require.NoError(t, err)
	require.Empty(t, r.States)
	require.Empty(t, r.Memberships)
	require.False(t, r.Complete || r.MembershipsComplete)

	// 2,500 channels: the memberships are read in chunks.
	const n = 2500
	var many []thread.State
	var regs []channel.Membership
	for i := range n {
		ch := fmt.Sprintf("ch-%04d", i)
		many = append(many, follow("u2", ch, 1))
		if i%2 == 0 {
			regs = append(regs, join("u2", ch))
		}
	}
	_, err = s.MergeStates(ctx, many)
	require.NoError(t, err)
	hydrateMemberships(t, s, "u2", regs)
	r, err = s.UserThreadsWithMemberships(ctx, "u2", "")
	require.NoError(t, err)
	require.Len(t, r.States, n)
	require.Len(t, r.Memberships, n/2)
	for _, m := range r.Memberships {
		var i int
		_, err := fmt.Sscanf(m.Key.Channel, "ch-%04d", &i)
		require.NoError(t, err)
		require.Zero(t, i%2, m.Key.Channel)
		require.Equal(t, "u2", m.Key.User)
	}
}

// Heads of threads in several channels, some unknown, one undecodable:
// one HMGET per channel finds each where it is.
func TestThreadHeadsAcrossChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	var heads []thread.Head
	var refs []thread.Ref
	for c := range 3 {
		for root := int64(1); root <= 4; root++ {
			ref := thread.Ref{Channel: fmt.Sprintf("c%d", c), Root: root}
			refs = append(refs, ref)
			if root != 3 {
				heads = append(heads, thread.Head{Ref: ref, Seq: root * 10, MessageID: "m", UpdatedAtUnixMs: int64(c*100) + root})
			}
		}
	}
	_, err := s.RaiseHeads(ctx, heads)
	require.NoError(t, err)
	bad := thread.Ref{Channel: "c1", Root: 9}
	require.NoError(t, s.redis.Client().HSet(ctx, s.HeadsKey("c1"), rootField(bad), "undecodable").Err())
	got, err := s.HeadsRedis(ctx, append([]thread.Ref{bad}, refs...))
	require.NoError(t, err)
	want := map[thread.Ref]thread.Head{}
	for _, h := range heads {
		want[h.Ref] = h
	}
	require.Equal(t, want, got)
}

// hydrateMemberships hydrates user's registers as the gateway does: the
// mention hash first (here empty), then the memberships, so that the
// user's view is complete.
func hydrateMemberships(tb testing.TB, s Store, user string, regs []channel.Membership) {
	tb.Helper()
	ctx := context.Background()
	require.NoError(tb, mentions.NewStore(nil, s.redis).HydrateRedis(ctx, user, nil))
	require.NoError(tb, members.NewStore(nil, s.redis).HydrateMemberships(ctx, user, regs))
}
