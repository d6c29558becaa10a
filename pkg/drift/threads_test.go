package drift_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// A thread head and a thread register only Redis holds are copied into
// Postgres, and ones only Postgres holds into Redis, by the kinds seam
// with no thread code in the sweep; a dry run finds all four and repairs
// none; a second sweep finds nothing.
func TestSweepRepairsThreadsBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	head := func(ch string, seq int64) thread.Head {
		return thread.Head{Ref: thread.Ref{Channel: ch, Root: 7}, Seq: seq, MessageID: "m" + itoa(seq), UpdatedAtUnixMs: 1000}
	}
	register := func(user string, read int64) thread.State {
		c := receipt.Cursor{Position: receipt.Position{Seq: read}, MessageID: "m" + itoa(read)}
		return thread.State{
			Key:      thread.Key{User: user, Ref: thread.Ref{Channel: "c", Root: 7}},
			Cursors:  receipt.State{Read: c, Delivered: c, DeviceID: "dev", UpdatedAtUnixMs: 1000},
			Follow:   thread.Follow{Following: true, VersionUnixMs: 900},
			Mentions: []int64{read + 1},
		}
	}
	pgHead, rdHead := head("pg-only", 4), head("rd-only", 6)
	pgReg, rdReg := register("pg-only", 3), register("rd-only", 5)
	_, err := threads.NewStore(bd.pg, nil).WriteHeadsPG(ctx, []thread.Head{pgHead})
	require.NoError(t, err)
	_, err = threads.NewStore(bd.pg, nil).WithMentionCap(capN).WriteStatesPG(ctx, []thread.State{pgReg})
	require.NoError(t, err)
	res, err := threads.NewStore(nil, bd.rs).RaiseHeads(ctx, []thread.Head{rdHead})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	sres, err := threads.NewStore(nil, bd.rs).WithMentionCap(capN).MergeStates(ctx, []thread.State{rdReg})
	require.NoError(t, err)
	require.NoError(t, sres[0].Err)

	oneEachWay := drift.Counts{RedisMissing: 1, PostgresMissing: 1}
	dry, err := drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, PageSize: 2, PagesPerSecond: 10000, ScanCount: 3,
		Grace: time.Minute, MentionCap: capN, DryRun: true})
	require.NoError(t, err)
	rep, err := dry.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, oneEachWay, *rep.ByKind[drift.KindThreadHeads], "%+v", rep)
	require.Equal(t, oneEachWay, *rep.ByKind[drift.KindThreadStates], "%+v", rep)
	require.Zero(t, rep.Repaired.Total())
	pgHeads, err := threads.NewStore(bd.pg, nil).HeadsPG(ctx, []thread.Ref{rdHead.Ref})
	require.NoError(t, err)
	require.Empty(t, pgHeads, "a dry run writes nothing")

	sw := newSweeper(t, bd)
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, oneEachWay, *rep.ByKind[drift.KindThreadHeads], "%+v", rep)
	require.Equal(t, oneEachWay, *rep.ByKind[drift.KindThreadStates], "%+v", rep)
	require.Equal(t, rep.Found, rep.Repaired)
	require.Zero(t, rep.Failed)

	for _, h := range []thread.Head{pgHead, rdHead} {
		pg, err := threads.NewStore(bd.pg, nil).HeadsPG(ctx, []thread.Ref{h.Ref})
		require.NoError(t, err)
		require.Equal(t, []thread.Head{h}, pg, h.Ref.String())
		rd, err := threads.NewStore(nil, bd.rs).HeadsRedis(ctx, []thread.Ref{h.Ref})
		require.NoError(t, err)
		require.Equal(t, h, rd[h.Ref], h.Ref.String())
	}
	for _, st := range []thread.State{pgReg, rdReg} {
		pg, err := threads.NewStore(bd.pg, nil).StatesPG(ctx, []thread.Key{st.Key})
		require.NoError(t, err)
		require.Len(t, pg, 1, st.Key.User)
		require.True(t, thread.Same(st, pg[0]), "%s: postgres holds %+v", st.Key.User, pg[0])
		rd, err := threads.NewStore(nil, bd.rs).StatesRedis(ctx, []thread.Key{st.Key})
		require.NoError(t, err)
		require.NotNil(t, rd[0], st.Key.User)
		require.True(t, thread.Same(st, *rd[0]), "%s: redis holds %+v", st.Key.User, *rd[0])
	}

	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.ByKind[drift.KindThreadHeads].Total(), "%+v", rep.ByKind[drift.KindThreadHeads])
	require.Zero(t, rep.ByKind[drift.KindThreadStates].Total(), "%+v", rep.ByKind[drift.KindThreadStates])
}
