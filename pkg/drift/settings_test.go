package drift_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
)

// Privacy settings drift each way is found and repaired with
// privacy.Merge; the defaults cached in Redis are not drift; a register
// within the grace period is in flight; a register repaired into Redis
// takes a read the user no longer shares out of their channel views; a
// second sweep finds nothing.
func TestSweepRepairsSettingsBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	now := time.Now().UnixMilli()
	set := func(user string, read, del bool, v int64) privacy.Settings {
		return privacy.Settings{User: user, ShareRead: read, ShareDelivered: del, VersionMs: v}
	}
	_, err := settings.NewStore(bd.pg, nil).WritePG(ctx, []privacy.Settings{
		set("pg-ahead", false, true, 3000), set("rd-ahead", true, true, 1000), set("rd-missing", true, false, 1000),
		set("same", false, false, 1000), set("in-flight", true, true, 1000),
	})
	require.NoError(t, err)
	_, err = settings.NewStore(nil, bd.rs).MergeRedis(ctx, []privacy.Settings{
		set("pg-ahead", true, true, 2000), set("rd-ahead", false, true, 2000), set("pg-missing", true, false, 1500),
		set("same", false, false, 1000), set("in-flight", false, true, now), privacy.Default("defaults-cached"),
	})
	require.NoError(t, err)
	// pg-ahead's public read is in a channel view: the repair hides it.
	st := receipt.State{Key: receipt.Key{User: "pg-ahead", Channel: "c"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 4}}, UpdatedAtUnixMs: 1000}
	st, _ = receipt.Merge(receipt.State{}, st)
	_, err = cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{st})
	require.NoError(t, err)
	_, err = cursors.NewStore(bd.rs).Merge(ctx, []receipt.State{st})
	require.NoError(t, err)
	_, err = readby.NewStore(nil, bd.rs).Apply(ctx, []readby.Move{{Channel: "c", User: "pg-ahead", Side: readby.Read, Position: receipt.Position{Seq: 4}, AtUnixMs: 1000}}, 0)
	require.NoError(t, err)

	sw := newSweeper(t, bd)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{RedisAhead: 1, PostgresAhead: 1, RedisMissing: 1, PostgresMissing: 1}, *rep.ByKind[drift.KindSettings], "%+v", rep)
	require.Equal(t, 1, rep.InFlight)
	require.Equal(t, rep.Found, rep.Repaired)
	require.Zero(t, rep.Failed)

	want := map[string]privacy.Settings{
		"pg-ahead": set("pg-ahead", false, true, 3000), "rd-ahead": set("rd-ahead", false, true, 2000),
		"rd-missing": set("rd-missing", true, false, 1000), "pg-missing": set("pg-missing", true, false, 1500),
		"same": set("same", false, false, 1000),
	}
	for user, w := range want {
		pg, err := settings.NewStore(bd.pg, nil).StoredPG(ctx, []string{user})
		require.NoError(t, err)
		require.Equal(t, w, pg[user], user)
		rd, found, err := settings.NewStore(nil, bd.rs).ReadRedis(ctx, []string{user})
		require.NoError(t, err)
		require.True(t, found[0], user)
		require.Equal(t, w, rd[0], user)
	}
	pg, err := settings.NewStore(bd.pg, nil).StoredPG(ctx, []string{"in-flight", "defaults-cached"})
	require.NoError(t, err)
	require.Equal(t, set("in-flight", true, true, 1000), pg["in-flight"], "in flight: left for the persister")
	require.NotContains(t, pg, "defaults-cached", "the cached defaults are not copied")
	views, err := readby.NewStore(nil, bd.rs).ReadAll(ctx, []string{"c"})
	require.NoError(t, err)
	require.NotContains(t, views[0].Read, "pg-ahead", "the repaired register hides the read")

	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.ByKind[drift.KindSettings].Total(), "%+v", rep.ByKind[drift.KindSettings])
}

// The settings of an erased user are not copied back: while Redis holds
// an erasure Postgres has not applied, the user's row stays out of Redis.
func TestSweepDoesNotResurrectErasedSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	_, err := settings.NewStore(bd.pg, nil).WritePG(ctx, []privacy.Settings{{User: "gone", ShareDelivered: true, VersionMs: 1000}, {User: "kept", ShareDelivered: true, VersionMs: 1000}})
	require.NoError(t, err)
	_, err = bd.rs.Erase(ctx, "gone", 50_000, 0, kind.ErasedHashes(kinds.All(), &kind.Env{Redis: bd.rs}, "gone"), nil)
	require.NoError(t, err)
	rep, err := newSweeper(t, bd).SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Erased, "%+v", rep)
	_, found, err := settings.NewStore(nil, bd.rs).ReadRedis(ctx, []string{"gone", "kept"})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, found, "the erased user's settings stay out of Redis; another user's are repaired")
}
