package drift_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
)

// Group mention drift each way is repaired by their merge; what Redis
// holds ahead is in flight until passes found it ahead for the grace (the
// sets carry no time); a last sweep finds nothing.
func TestSweepRepairsGroupMentionsBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	gs := groupmentions.NewStore(bd.pg, bd.rs).WithMentionCap(capN)
	gm := func(seq int64, sender string) channel.GroupMention {
		return channel.GroupMention{Seq: seq, Sender: sender}
	}
	_, err := gs.WritePG(ctx, []channel.GroupMentions{
		{Channel: "pg-ahead", Mentions: []channel.GroupMention{gm(1, "x"), gm(2, "y")}},
		{Channel: "rd-missing", Mentions: []channel.GroupMention{gm(5, "x")}},
		{Channel: "same", Mentions: []channel.GroupMention{gm(3, "")}},
	})
	require.NoError(t, err)
	require.NoError(t, gs.AddRedis(ctx, []channel.GroupMentions{
		{Channel: "pg-ahead", Mentions: []channel.GroupMention{gm(1, "x")}},
		{Channel: "pg-missing", Mentions: []channel.GroupMention{gm(4, "z")}},
		{Channel: "same", Mentions: []channel.GroupMention{gm(3, "")}},
	}))

	sw, clock := clockedSweeper(t, bd)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{PostgresAhead: 1, RedisMissing: 1}, *rep.ByKind[drift.KindGroupMentions], "%+v", rep)
	require.Equal(t, 1, rep.InFlight, "pg-missing seen ahead once")
	clock.Store(int64(time.Minute))
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{PostgresMissing: 1}, *rep.ByKind[drift.KindGroupMentions], "%+v", rep)

	for ch, want := range map[string][]channel.GroupMention{
		"pg-ahead": {gm(1, "x"), gm(2, "y")}, "rd-missing": {gm(5, "x")}, "pg-missing": {gm(4, "z")}, "same": {gm(3, "")},
	} {
		pg, err := gs.ReadPG(ctx, []string{ch})
		require.NoError(t, err)
		require.Equal(t, []channel.GroupMentions{{Channel: ch, Mentions: want}}, pg, ch)
		rd, err := gs.ReadRedis(ctx, []string{ch})
		require.NoError(t, err)
		require.NotNil(t, rd[0], ch)
		require.Equal(t, want, rd[0].Mentions, ch)
	}
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.ByKind[drift.KindGroupMentions].Total(), "%+v", rep.ByKind[drift.KindGroupMentions])
}
