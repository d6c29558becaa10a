package drift_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// Notification register drift each way is found and repaired with
// notification.Merge; a register within the grace period is in flight; a
// second sweep finds nothing.
func TestSweepRepairsNotificationsBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	ns := notifications.NewStore(bd.pg, bd.rs)
	now := time.Now().UnixMilli()
	reg := func(user string, l notification.Level, muted, v int64) notification.Register {
		return notification.Register{Key: receipt.Key{User: user, Channel: "c"}, Level: l, MutedUntilUnixMs: muted, VersionUnixMs: v}
	}
	_, err := ns.WritePG(ctx, []notification.Register{
		reg("pg-ahead", notification.None, 0, 3000), reg("rd-ahead", notification.All, 0, 1000),
		reg("rd-missing", notification.Mentions, 9, 1000), reg("same", notification.None, 0, 1000),
		reg("in-flight", notification.All, 0, 1000),
	})
	require.NoError(t, err)
	_, err = ns.MergeRedis(ctx, []notification.Register{
		reg("pg-ahead", notification.All, 0, 2000), reg("rd-ahead", notification.Mentions, 5, 2000),
		reg("pg-missing", notification.None, 0, 1500), reg("same", notification.None, 0, 1000),
		reg("in-flight", notification.None, 0, now),
	})
	require.NoError(t, err)

	sw := newSweeper(t, bd)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{RedisAhead: 1, PostgresAhead: 1, RedisMissing: 1, PostgresMissing: 1}, *rep.ByKind[drift.KindNotifications], "%+v", rep)
	require.Equal(t, 1, rep.InFlight)
	require.Equal(t, rep.Found, rep.Repaired)
	require.Zero(t, rep.Failed)

	for _, w := range []notification.Register{
		reg("pg-ahead", notification.None, 0, 3000), reg("rd-ahead", notification.Mentions, 5, 2000),
		reg("rd-missing", notification.Mentions, 9, 1000), reg("pg-missing", notification.None, 0, 1500),
		reg("same", notification.None, 0, 1000),
	} {
		pg, err := ns.ReadPG(ctx, w.Key.User, nil)
		require.NoError(t, err)
		require.Equal(t, []notification.Register{w}, pg, w.Key.User)
		rd, err := ns.ReadRedisKeys(ctx, []receipt.Key{w.Key})
		require.NoError(t, err)
		require.NotNil(t, rd[0], w.Key.User)
		require.Equal(t, w, *rd[0], w.Key.User)
	}
	pg, err := ns.ReadPG(ctx, "in-flight", nil)
	require.NoError(t, err)
	require.Equal(t, []notification.Register{reg("in-flight", notification.All, 0, 1000)}, pg, "in flight: left for the persister")

	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.ByKind[drift.KindNotifications].Total(), "%+v", rep.ByKind[drift.KindNotifications])
}
