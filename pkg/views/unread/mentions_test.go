package unread

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
)

// The view counts the mentions the kind keeps,
// above the user's read, and trusts the user's channels once the kind's
// hash is hydrated beside the memberships.
func TestUnreadViewCountsTheKindsMentions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user, capN = "u", 2
	u, rs, _ := newTestStore(t)
	u = u.WithMentionCap(capN)
	s := mentions.NewStore(nil, rs).WithMentionCap(capN)
	var regs []channel.Membership
	var ms []channel.Mentions
	var heads []channel.Head
	for _, ch := range []string{"a", "b"} {
		k := receipt.Key{User: user, Channel: ch}
		regs = append(regs, channel.Join(k, 1, 1, 0))
		ms = append(ms, channel.Mentions{Key: k, Seqs: []int64{2, 5, 7, 9}})
		heads = append(heads, channel.Head{Channel: ch, Seq: 10})
	}
	_, err := cursors.NewStore(rs).Merge(ctx, []receipt.State{{Key: receipt.Key{User: user, Channel: "a"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 6}, MessageID: "m6"}, UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	_, err = headkind.NewStore(nil, rs).RaiseRedis(ctx, heads)
	require.NoError(t, err)
	require.NoError(t, members.NewStore(nil, rs).HydrateMemberships(ctx, user, regs))
	view, err := u.Read(ctx, user, nil)
	require.NoError(t, err)
	require.False(t, view.MembershipsComplete, "the mentions not hydrated yet")

	require.NoError(t, s.HydrateRedis(ctx, user, ms))
	view, err = u.Read(ctx, user, nil)
	require.NoError(t, err)
	require.True(t, view.MembershipsComplete)
	require.Len(t, view.Channels, 2)
	for _, cv := range view.Channels {
		want, capped := channel.MentionCount(channel.Retain([]int64{2, 5, 7, 9}, capN), cv.State.EffectiveRead().Seq, capN)
		require.Equal(t, want, cv.Mentions, cv.Channel)
		require.Equal(t, capped, cv.MentionsCapped, cv.Channel)
	}
	require.Equal(t, int64(2), view.Channels[0].Mentions, "a: 7 and 9 above the read at 6")
	require.Equal(t, int64(3), view.Channels[1].Mentions, "b: the kept 5, 7 and 9")
}
