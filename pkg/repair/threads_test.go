package repair_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/repair"
	"github.com/readstate/receipts/pkg/thread"
)

// A dead-lettered thread event is repaired by the kinds' rules: the
// record, Redis' value and Postgres' row merge, and both stores end equal.
func TestRepairThreads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(ctx))
	const mentionCap = 2
	r := &repair.Repairer{Postgres: pg, Redis: rs, MentionCap: mentionCap}
	ref := thread.Ref{Channel: "c", Root: 4}

	// Head: Redis ahead of the record, Postgres behind both.
	_, err := threads.NewStore(nil, rs).RaiseHeads(ctx, []thread.Head{{Ref: ref, Seq: 9, MessageID: "m9", UpdatedAtUnixMs: 90}})
	require.NoError(t, err)
	_, err = threads.NewStore(pg, nil).WriteHeadsPG(ctx, []thread.Head{{Ref: ref, Seq: 2, UpdatedAtUnixMs: 20}})
	require.NoError(t, err)
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{ThreadHead: &thread.Head{Ref: ref, Seq: 5, UpdatedAtUnixMs: 50}}))
	want := thread.Head{Ref: ref, Seq: 9, MessageID: "m9", UpdatedAtUnixMs: 90}
	ph, err := threads.NewStore(pg, nil).HeadsPG(ctx, []thread.Ref{ref})
	require.NoError(t, err)
	require.Equal(t, []thread.Head{want}, ph)
	rh, err := threads.NewStore(nil, rs).HeadsRedis(ctx, []thread.Ref{ref})
	require.NoError(t, err)
	require.Equal(t, want, rh[ref])

	// Register: Postgres holds the follow, Redis a read, the record
	// mentions; each store ends with all three.
	k := thread.Key{User: "u", Ref: ref}
	read := receipt.Cursor{Position: receipt.Position{Seq: 3}, MessageID: "m3"}
	_, err = threads.NewStore(pg, nil).WithMentionCap(mentionCap).WriteStatesPG(ctx, []thread.State{{Key: k, Follow: thread.Follow{Following: true, VersionUnixMs: 10}}})
	require.NoError(t, err)
	_, err = threads.NewStore(nil, rs).WithMentionCap(mentionCap).MergeStates(ctx, []thread.State{{Key: k, Cursors: receipt.State{Read: read, Delivered: read, UpdatedAtUnixMs: 30}}})
	require.NoError(t, err)
	rec := thread.State{Key: k, Mentions: []int64{1, 5, 6, 8}}
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Key: k.ChannelKey(), Thread: &rec}))
	wantSt := thread.State{Key: k, Cursors: receipt.State{Read: read, Delivered: read, UpdatedAtUnixMs: 30},
		Follow: thread.Follow{Following: true, VersionUnixMs: 10}, Mentions: []int64{5, 6, 8}}
	ps, err := threads.NewStore(pg, nil).StatesPG(ctx, []thread.Key{k})
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.True(t, thread.Same(wantSt, ps[0]), "postgres holds %+v", ps[0])
	rsSt, err := threads.NewStore(nil, rs).StatesRedis(ctx, []thread.Key{k})
	require.NoError(t, err)
	require.NotNil(t, rsSt[0])
	require.True(t, thread.Same(wantSt, *rsSt[0]), "redis holds %+v", *rsSt[0])
}
