package repair_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/repair"
	"github.com/readstate/receipts/pkg/views/readby"
)

// A settings event that failed to persist is repaired like a cursor: the
// record, Redis' register and Postgres' row merge (the greater version
// wins), both stores end equal, and when Redis' register changes the
// user's channel views follow it (a read no longer shared leaves them).
func TestRepairSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(ctx))
	r := &repair.Repairer{Postgres: pg, Redis: rs}
	both := func(user string) (privacy.Settings, privacy.Settings) {
		t.Helper()
		p, err := settings.NewStore(pg, nil).ReadPG(ctx, []string{user})
		require.NoError(t, err)
		rd, found, err := settings.NewStore(nil, rs).ReadRedis(ctx, []string{user})
		require.NoError(t, err)
		require.True(t, found[0], "Redis holds the register")
		return p[0], rd[0]
	}

	// Redis lost the register (flushed), Postgres never got it (the
	// dead letter): the record goes to both, and the user's public read
	// leaves the view of their channel.
	k := receipt.Key{User: "shy", Channel: "c"}
	st := receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 4}}, UpdatedAtUnixMs: 1_000}
	st, _ = receipt.Merge(receipt.State{}, st)
	_, err := cursors.NewStore(rs).Merge(ctx, []receipt.State{st})
	require.NoError(t, err)
	_, err = readby.NewStore(nil, rs).Apply(ctx, []readby.Move{
		{Channel: "c", User: "shy", Side: readby.Read, Position: receipt.Position{Seq: 4}, AtUnixMs: 1_000},
		{Channel: "c", User: "shy", Side: readby.Delivered, Position: receipt.Position{Seq: 4}, AtUnixMs: 1_000},
	}, 0)
	require.NoError(t, err)
	hide := privacy.Settings{User: "shy", ShareRead: false, ShareDelivered: true, VersionMs: 5_000}
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Settings: &hide, AcceptedAtUnixMs: hide.VersionMs}))
	p, rd := both("shy")
	require.Equal(t, hide, p)
	require.Equal(t, hide, rd)
	views, err := readby.NewStore(nil, rs).ReadAll(ctx, []string{"c"})
	require.NoError(t, err)
	require.NotContains(t, views[0].Read, "shy", "a read no longer shared leaves the view")
	require.Contains(t, views[0].Delivered, "shy", "delivered is still shared")

	// Redis ahead of the record (a newer change already applied there),
	// Postgres behind both: Postgres catches up with Redis.
	newer := privacy.Settings{User: "u2", ShareRead: true, ShareDelivered: false, VersionMs: 9_000}
	_, err = settings.NewStore(nil, rs).MergeRedis(ctx, []privacy.Settings{newer})
	require.NoError(t, err)
	older := privacy.Settings{User: "u2", ShareRead: false, ShareDelivered: false, VersionMs: 7_000}
	_, err = settings.NewStore(pg, nil).WritePG(ctx, []privacy.Settings{{User: "u2", ShareRead: true, ShareDelivered: true, VersionMs: 1}})
	require.NoError(t, err)
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Settings: &older, AcceptedAtUnixMs: older.VersionMs}))
	p, rd = both("u2")
	require.Equal(t, newer, p)
	require.Equal(t, newer, rd)

	// Postgres ahead of the record and of Redis: Redis catches up.
	pgNewer := privacy.Settings{User: "u3", ShareRead: false, ShareDelivered: true, VersionMs: 8_000}
	_, err = settings.NewStore(pg, nil).WritePG(ctx, []privacy.Settings{pgNewer})
	require.NoError(t, err)
	_, err = settings.NewStore(nil, rs).MergeRedis(ctx, []privacy.Settings{{User: "u3", ShareRead: true, ShareDelivered: true, VersionMs: 2_000}})
	require.NoError(t, err)
	rec := privacy.Settings{User: "u3", ShareRead: true, ShareDelivered: true, VersionMs: 3_000}
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Settings: &rec, AcceptedAtUnixMs: rec.VersionMs}))
	p, rd = both("u3")
	require.Equal(t, pgNewer, p)
	require.Equal(t, pgNewer, rd)
}

// A settings dead letter of an erased user: one that predates the erasure
// is dropped (nothing written, Postgres caught up with the erasure Redis
// holds); one accepted after it is repaired into both stores.
func TestRepairSettingsRespectsErasures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(ctx))
	r := &repair.Repairer{Postgres: pg, Redis: rs}
	set := func(version int64) event.Decoded {
		st := privacy.Settings{User: "gone", ShareDelivered: true, VersionMs: version}
		return event.Decoded{Settings: &st, AcceptedAtUnixMs: version}
	}
	require.NoError(t, r.RepairDecoded(ctx, set(1_000)))
	rows, err := settings.NewStore(pg, nil).StoredPG(ctx, []string{"gone"})
	require.NoError(t, err)
	require.Len(t, rows, 1)

	ts, err := rs.Erase(ctx, "gone", 100_000, 0, kind.ErasedHashes(kinds.All(), &kind.Env{Redis: rs}, "gone"), nil)
	require.NoError(t, err)
	require.NoError(t, r.RepairDecoded(ctx, set(99_000)))
	rows, err = settings.NewStore(pg, nil).StoredPG(ctx, []string{"gone"})
	require.NoError(t, err)
	require.Empty(t, rows, "Postgres applied the erasure and the old settings stayed out")
	_, found, err := settings.NewStore(nil, rs).ReadRedis(ctx, []string{"gone"})
	require.NoError(t, err)
	require.False(t, found[0], "nothing written back into Redis")

	after := set(ts.ErasedAtUnixMs + 10_000)
	require.NoError(t, r.RepairDecoded(ctx, after))
	rows, err = settings.NewStore(pg, nil).StoredPG(ctx, []string{"gone"})
	require.NoError(t, err)
	require.Equal(t, *after.Settings, rows["gone"])
	sts, found, err := settings.NewStore(nil, rs).ReadRedis(ctx, []string{"gone"})
	require.NoError(t, err)
	require.True(t, found[0])
	require.Equal(t, *after.Settings, sts[0])
}
