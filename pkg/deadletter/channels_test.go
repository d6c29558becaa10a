package deadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

// Dead letters of every kind (a head, a membership with its join read,
// mentions, a privacy settings change) are repaired into both stores by their rules, not parked.
func TestConsumerRepairsEveryKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	b := kafkatest.New(t)
	group := "reconciler-" + kafkatest.Suffix()
	k := receipt.Key{User: "u1", Channel: "c1"}
	join := channel.Join(k, 4, 400, 4)
	hide := privacy.Settings{User: "u1", ShareRead: false, ShareDelivered: true, VersionMs: 500}
	priv := receipt.State{Key: k, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 4}}}
	var recs []*kgo.Record
	for _, d := range []event.Decoded{
		{Channel: &channel.Head{Channel: "c1", Seq: 12}},
		{Key: k, Membership: &join, Receipt: &priv},
		{Key: k, Mentions: []int64{7, 9}},
		{Settings: &hide, AcceptedAtUnixMs: hide.VersionMs},
	} {
		r, err := event.EncodeDecoded(d)
		require.NoError(t, err)
		recs = append(recs, dltRecord(b, r.Key, r.Value, 0, int64(len(recs)), "rejected by postgres: check"))
	}
	produce(t, b, recs...)
	startConsumer(t, bd, b, group, nil)
	require.Eventually(t, func() bool { return metric(t, bd.reg, "receipts_reconciler_reconciled_total") == 4 },
		waitFor, 20*time.Millisecond)
	require.Zero(t, metric(t, bd.reg, "receipts_reconciler_parked_total", "kind", deadletter.KindUndecodable))

	pgHeads, err := heads.NewStore(bd.pg, nil).ReadPG(ctx, []string{"c1"})
	require.NoError(t, err)
	require.Equal(t, int64(12), pgHeads[0].Seq)
	rh, err := heads.NewStore(nil, bd.rs).ReadRedis(ctx, []string{"c1"})
	require.NoError(t, err)
	require.Equal(t, int64(12), rh["c1"].Seq)
	regs, _, err := members.NewStore(nil, bd.rs).Memberships(ctx, "u1", nil)
	require.NoError(t, err)
	require.Equal(t, []channel.Membership{join}, regs)
	pm, err := members.NewStore(bd.pg, nil).ReadPG(ctx, "u1", nil)
	require.NoError(t, err)
	require.Equal(t, []channel.Membership{join}, pm)
	st, ok := pgState(t, bd.pg, k)
	require.True(t, ok)
	require.Equal(t, receipt.Position{Seq: 4}, st.EffectiveRead())
	ms := mentions.NewStore(bd.pg, bd.rs)
	mn, err := ms.ReadRedis(ctx, []receipt.Key{k})
	require.NoError(t, err)
	require.Equal(t, []int64{7, 9}, mn[0])
	pmn, err := ms.ReadPG(ctx, "u1", nil)
	require.NoError(t, err)
	require.Equal(t, []int64{7, 9}, pmn[0].Seqs)
	ps, err := settings.NewStore(bd.pg, nil).StoredPG(ctx, []string{"u1"})
	require.NoError(t, err)
	require.Equal(t, hide, ps["u1"], "the settings dead letter reached Postgres")
	rs, found, err := settings.NewStore(nil, bd.rs).ReadRedis(ctx, []string{"u1"})
	require.NoError(t, err)
	require.True(t, found[0])
	require.Equal(t, hide, rs[0])
}
