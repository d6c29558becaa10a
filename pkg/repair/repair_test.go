package repair_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/repair"
	"github.com/readstate/receipts/pkg/thread"
)

// Every kind of event is applied to both stores by its rule: the record,
// Redis' value and Postgres' row all merge, and both stores end equal.
func TestRepairDecodedEveryKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(ctx))
	r := &repair.Repairer{Postgres: pg, Redis: rs, MentionCap: 2}
	k := receipt.Key{User: "u", Channel: "c"}

	// Heads: Redis ahead of the record, Postgres behind both.
	_, err := heads.NewStore(nil, rs).RaiseRedis(ctx, []channel.Head{{Channel: "c", Seq: 9, MessageID: "m9"}})
	require.NoError(t, err)
	_, err = heads.NewStore(pg, nil).WritePG(ctx, []channel.Head{{Channel: "c", Seq: 2}})
	require.NoError(t, err)
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Channel: &channel.Head{Channel: "c", Seq: 5}}))
	ph, err := heads.NewStore(pg, nil).ReadPG(ctx, []string{"c"})
	require.NoError(t, err)
	rh, err := heads.NewStore(nil, rs).ReadRedis(ctx, []string{"c"})
	require.NoError(t, err)
	require.Equal(t, int64(9), ph[0].Seq)
	require.Equal(t, "m9", ph[0].MessageID)
	require.Equal(t, int64(9), rh["c"].Seq)

	// Membership: Postgres ahead (a leave), the record an older join.
	leave := channel.Leave(k, 7, 700)
	_, err = members.NewStore(pg, nil).WritePG(ctx, []channel.Membership{leave})
	require.NoError(t, err)
	join := channel.Join(k, 3, 300, 3)
	priv := receipt.State{Key: k, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 3}}}
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Key: k, Membership: &join, Receipt: &priv}))
	pm, err := members.NewStore(pg, nil).ReadPG(ctx, "u", nil)
	require.NoError(t, err)
	require.Equal(t, []channel.Membership{leave}, pm)
	um, _, err := members.NewStore(nil, rs).Memberships(ctx, "u", nil)
	require.NoError(t, err)
	require.Equal(t, []channel.Membership{leave}, um)
	cm, _, err := members.NewStore(nil, rs).ChannelMembers(ctx, "c", nil)
	require.NoError(t, err)
	require.Equal(t, []channel.Membership{leave}, cm)
	ps, err := cursors.NewPostgres(pg).Get(ctx, "u", nil)
	require.NoError(t, err)
	require.Equal(t, receipt.Position{Seq: 3}, ps[0].EffectiveRead(), "the cursors of the same record are repaired too")

	// Mentions: a union kept to the newest cap+1 in both.
	ms := mentions.NewStore(pg, rs).WithMentionCap(2)
	require.NoError(t, ms.AddRedis(ctx, []channel.Mentions{{Key: k, Seqs: []int64{8}}}))
	_, err = ms.WritePG(ctx, []channel.Mentions{{Key: k, Seqs: []int64{1, 6}}})
	require.NoError(t, err)
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Key: k, Mentions: []int64{4}}))
	pmn, err := ms.ReadPG(ctx, "u", nil)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 6, 8}, pmn[0].Seqs)
	rmn, err := ms.ReadRedis(ctx, []receipt.Key{k})
	require.NoError(t, err)
	require.Equal(t, []int64{4, 6, 8}, rmn[0])
	var rows int
	require.NoError(t, pg.Pool().QueryRow(ctx, `SELECT count(*) FROM mentions`).Scan(&rows))
	require.Equal(t, 3, rows, "trimmed to the newest cap+1")

	// Notification levels: Redis ahead of the record, Postgres behind both.
	ns := notifications.NewStore(pg, rs)
	newer := notification.Register{Key: k, Level: notification.None, MutedUntilUnixMs: 5, VersionUnixMs: 900}
	_, err = ns.MergeRedis(ctx, []notification.Register{newer})
	require.NoError(t, err)
	_, err = ns.WritePG(ctx, []notification.Register{{Key: k, Level: notification.All, VersionUnixMs: 100}})
	require.NoError(t, err)
	rec := notification.Register{Key: k, Level: notification.Mentions, VersionUnixMs: 500}
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Key: k, Notifications: &rec}))
	pn, err := ns.ReadPG(ctx, "u", nil)
	require.NoError(t, err)
	require.Equal(t, []notification.Register{newer}, pn)
	rn, err := ns.ReadRedisKeys(ctx, []receipt.Key{k})
	require.NoError(t, err)
	require.Equal(t, newer, *rn[0])

	// Deletions: each store holds a part; the record adds its own to both.
	ds := deletions.NewStore(pg, rs)
	_, err = ds.AddRedis(ctx, []channel.Deletions{{Channel: "c", Seqs: []int64{2}}})
	require.NoError(t, err)
	_, err = ds.WritePG(ctx, []channel.Deletions{{Channel: "c", Seqs: []int64{3}}})
	require.NoError(t, err)
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Deletions: &channel.Deletions{Channel: "c", Seqs: []int64{5, 7}, UpdatedAtUnixMs: 1}}))
	pd, err := ds.ReadPG(ctx, []thread.Ref{{Channel: "c"}})
	require.NoError(t, err)
	require.Equal(t, []channel.Deletions{{Channel: "c", Seqs: []int64{2, 3, 5, 7}}}, pd)
	rd, err := ds.ReadRedis(ctx, []thread.Ref{{Channel: "c"}})
	require.NoError(t, err)
	require.Equal(t, [][]int64{{2, 3, 5, 7}}, rd)
}
