package unread

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Order reads a user's channels with their heads, complete only when
// Redis holds them.
func TestOrderCompleteOnlyWhenHydrated(t *testing.T) {
	t.Parallel()
	v, s, _ := newTestStore(t)
	ctx := context.Background()
	n := 3
	_, err := headkind.NewStore(nil, s).RaiseRedis(ctx, []channel.Head{{Channel: "c", Seq: int64(n), MessageID: fmt.Sprintf("m%d", n), UpdatedAtUnixMs: int64(n)}})
	require.NoError(t, err)
	_, err = cursors.NewStore(s).Merge(ctx, []receipt.State{{Key: receipt.Key{User: "u", Channel: "c"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 1}}, UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	got, err := v.Order(ctx, "u")
	require.NoError(t, err)
	require.False(t, got.Complete, "the user's hashes were never hydrated")
	require.Equal(t, []channel.Head{{Channel: "c", Seq: int64(n), MessageID: fmt.Sprintf("m%d", n), UpdatedAtUnixMs: int64(n)}}, got.Heads)

	require.NoError(t, cursors.NewStore(s).Hydrate(ctx, "u", nil, redisstore.Incarnation{}))
	require.NoError(t, members.NewStore(nil, s).HydrateMemberships(ctx, "u", nil))
	got, err = v.Order(ctx, "u")
	require.NoError(t, err)
	require.True(t, got.Complete, "hydrated: the cursor alone (no register) still counts")
	require.Len(t, got.Heads, 1)
}

// Order leaves out the channels a user left: read without the
// registers' values when the hash counts no left register, with them when
// it counts some or has no count (an older build's hash).
func TestOrderLeavesLeftChannelsOut(t *testing.T) {
	t.Parallel()
	v, s, rdb := newTestStore(t)
	ctx := context.Background()
	var regs []channel.Membership
	var heads []channel.Head
	for i := range 5 {
		ch := fmt.Sprintf("c%d", i)
		regs = append(regs, channel.Join(receipt.Key{User: "u", Channel: ch}, 1, 1, 0))
		heads = append(heads, channel.Head{Channel: ch, Seq: 3, MessageID: "m3", UpdatedAtUnixMs: int64(10 + i)})
	}
	require.NoError(t, members.NewStore(nil, s).HydrateMemberships(ctx, "u", regs))
	_, err := headkind.NewStore(nil, s).RaiseRedis(ctx, heads)
	require.NoError(t, err)
	channelsOf := func() []string {
		t.Helper()
		got, err := v.Order(ctx, "u")
		require.NoError(t, err)
		var out []string
		for _, h := range got.Heads {
			out = append(out, h.Channel)
		}
		return out
	}
	require.Equal(t, "0", rdb.HGet(ctx, members.NewStore(nil, s).UserMembersKey("u"), members.LeftCountField).Val())
	require.Equal(t, []string{"c0", "c1", "c2", "c3", "c4"}, channelsOf())

	require.NoError(t, members.NewStore(nil, s).ChangeMembership(ctx, channel.Leave(receipt.Key{User: "u", Channel: "c1"}, 2, 2)).Err)
	require.Equal(t, "1", rdb.HGet(ctx, members.NewStore(nil, s).UserMembersKey("u"), members.LeftCountField).Val())
	require.Equal(t, []string{"c0", "c2", "c3", "c4"}, channelsOf(), "counted: the values read")

	require.NoError(t, rdb.HDel(ctx, members.NewStore(nil, s).UserMembersKey("u"), members.LeftCountField).Err())
	require.Equal(t, []string{"c0", "c2", "c3", "c4"}, channelsOf(), "no count: the values read")

	// A count that says none while a register says left cannot be: it
	// shows the values are not read then.
	require.NoError(t, rdb.HSet(ctx, members.NewStore(nil, s).UserMembersKey("u"), members.LeftCountField, "0").Err())
	require.Equal(t, []string{"c0", "c1", "c2", "c3", "c4"}, channelsOf(), "counted none: fields only")
}
