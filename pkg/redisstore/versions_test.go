package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// A join or leave is versioned by Redis: its time is Redis' clock, not
// the one the gateway proposed, and when the register stored is ahead of
// that (a version of a clock that ran ahead) the change goes one above
// it, so it always wins over what it read. Both hashes hold the result.
func TestChangeMembershipTakesItsVersionFromRedis(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := context.Background()
	k := receipt.Key{User: "u", Channel: "c"}
	before := time.Now().Add(-time.Minute).UnixMilli()
	ahead := time.Now().Add(10 * time.Minute).UnixMilli()

	res := s.ChangeMembership(ctx, channel.Join(k, 3, ahead, 3))
	require.NoError(t, res.Err)
	require.True(t, res.Changed)
	require.Equal(t, GenerationUnknown, res.Generation, "no tombstone in Redis")
	require.Greater(t, res.Membership.VersionUnixMs, before)
	require.Less(t, res.Membership.VersionUnixMs, ahead, "Redis' clock, not the proposed one")
	require.Equal(t, int64(3), res.Membership.VersionSeq)
	require.EqualValues(t, 1, res.MemberCount)

	// A register stored from a clock ahead: the leave goes above it.
	_, err := s.MergeMemberships(ctx, []channel.Membership{channel.Join(k, 3, ahead, 3)})
	require.NoError(t, err)
	res = s.ChangeMembership(ctx, channel.Leave(k, 3, 1))
	require.NoError(t, res.Err)
	require.Equal(t, channel.Leave(k, 3, ahead+1), res.Membership)
	require.Zero(t, res.MemberCount)
	byUser, _, err := s.Memberships(ctx, "u", []string{"c"})
	require.NoError(t, err)
	byChannel, _, err := s.ChannelMembers(ctx, "c", []string{"u"})
	require.NoError(t, err)
	require.Equal(t, []channel.Membership{channel.Leave(k, 3, ahead+1)}, byUser)
	require.Equal(t, byUser, byChannel)

	// A greater head orders by itself, at Redis' clock.
	res = s.ChangeMembership(ctx, channel.Join(k, 9, 1, 9))
	require.NoError(t, res.Err)
	require.Equal(t, int64(9), res.Membership.VersionSeq)
	require.Less(t, res.Membership.VersionUnixMs, ahead)
}
