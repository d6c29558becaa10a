package drift_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/thread"
)

// Deletion drift each way is repaired by the union: what Postgres holds
// beyond Redis at once, what Redis holds beyond Postgres (no time: maybe
// in flight) once it is still ahead a grace later; a sweep after finds
// nothing.
func TestSweepRepairsDeletionsBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	ds := deletions.NewStore(bd.pg, bd.rs)
	_, err := ds.WritePG(ctx, []channel.Deletions{{Channel: "pg-ahead", Seqs: []int64{1, 2, 3}},
		{Channel: "rd-ahead", Seqs: []int64{5}}, {Channel: "rd-missing", Seqs: []int64{8}}, {Channel: "same", Seqs: []int64{4}}})
	require.NoError(t, err)
	_, err = ds.AddRedis(ctx, []channel.Deletions{{Channel: "pg-ahead", Seqs: []int64{1}},
		{Channel: "rd-ahead", Seqs: []int64{5, 6, 9}}, {Channel: "pg-missing", Seqs: []int64{2}}, {Channel: "same", Seqs: []int64{4}}})
	require.NoError(t, err)

	sw, clock := clockedSweeper(t, bd)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{PostgresAhead: 1, RedisMissing: 1}, *rep.ByKind[drift.KindDeletions], "%+v", rep)
	require.Equal(t, rep.Found, rep.Repaired)
	clock.Store(int64(time.Minute))
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{RedisAhead: 1, PostgresMissing: 1}, *rep.ByKind[drift.KindDeletions], "%+v", rep)
	require.Equal(t, rep.Found, rep.Repaired)

	want := map[string][]int64{"pg-ahead": {1, 2, 3}, "rd-ahead": {5, 6, 9}, "rd-missing": {8}, "pg-missing": {2}, "same": {4}}
	for ch, seqs := range want {
		pg, err := ds.ReadPG(ctx, []thread.Ref{{Channel: ch}})
		require.NoError(t, err)
		require.Equal(t, []channel.Deletions{{Channel: ch, Seqs: seqs}}, pg, ch)
		rd, err := ds.ReadRedis(ctx, []thread.Ref{{Channel: ch}})
		require.NoError(t, err)
		require.Equal(t, [][]int64{seqs}, rd, ch)
	}
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.ByKind[drift.KindDeletions].Total())
}

// A thread's deleted replies are swept as their own set, beside their
// channel's: each side's missing set is copied to the other.
func TestSweepRepairsThreadDeletions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	ds := deletions.NewStore(bd.pg, bd.rs)
	pgOnly, rdOnly := thread.Ref{Channel: "c", Root: 2}, thread.Ref{Channel: "c", Root: 3}
	_, err := ds.WritePG(ctx, []channel.Deletions{{Channel: "c", Seqs: []int64{4}}, {Channel: "c", Root: 2, Seqs: []int64{1, 5}}})
	require.NoError(t, err)
	_, err = ds.AddRedis(ctx, []channel.Deletions{{Channel: "c", Seqs: []int64{4}}, {Channel: "c", Root: 3, Seqs: []int64{7}}})
	require.NoError(t, err)

	sw, clock := clockedSweeper(t, bd)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{RedisMissing: 1}, *rep.ByKind[drift.KindDeletions], "%+v", rep)
	clock.Store(int64(time.Minute))
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{PostgresMissing: 1}, *rep.ByKind[drift.KindDeletions], "%+v", rep)

	refs := []thread.Ref{{Channel: "c"}, pgOnly, rdOnly}
	pg, err := ds.ReadPG(ctx, refs)
	require.NoError(t, err)
	require.Equal(t, []channel.Deletions{{Channel: "c", Seqs: []int64{4}}, {Channel: "c", Root: 2, Seqs: []int64{1, 5}},
		{Channel: "c", Root: 3, Seqs: []int64{7}}}, pg)
	rd, err := ds.ReadRedis(ctx, refs)
	require.NoError(t, err)
	require.Equal(t, [][]int64{{4}, {1, 5}, {7}}, rd)
}

// Deletion sets are compared by digest: sets that agree (a large one
// among them) are never read whole, and one seq missing from a large
// set's Redis copy is found, read whole and repaired.
func TestSweepComparesDeletionDigests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	ds := deletions.NewStore(bd.pg, bd.rs)
	big := make([]int64, 50_000)
	for i := range big {
		big[i] = int64(2*i + 1)
	}
	sets := []channel.Deletions{{Channel: "big", Seqs: big}, {Channel: "small", Seqs: []int64{3, 4}}}
	_, err := ds.WritePG(ctx, sets)
	require.NoError(t, err)
	_, err = ds.AddRedis(ctx, sets)
	require.NoError(t, err)

	sw, _ := clockedSweeper(t, bd)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.ReadWhole, "%+v", rep)
	require.Zero(t, rep.ByKind[drift.KindDeletions].Total())

	// Redis loses a seq in the middle: the count differs, the bounds not.
	require.NoError(t, bd.rs.Client().ZRem(ctx, ds.RedisKey(thread.Ref{Channel: "big"}), "501").Err())
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.ReadWhole, "%+v", rep)
	require.Equal(t, drift.Counts{PostgresAhead: 1}, *rep.ByKind[drift.KindDeletions], "%+v", rep)
	rd, err := ds.ReadRedis(ctx, []thread.Ref{{Channel: "big"}})
	require.NoError(t, err)
	require.Equal(t, [][]int64{big}, rd)
}
