package drift_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
	"github.com/readstate/receipts/pkg/views/readby"
)

// The sweep never writes an erased user back: while the erasure is only in
// Redis (the persister has not applied it), Postgres' rows of the user are
// not copied into Redis; once applied, a row left behind that predates the
// erasure is not copied either; a user's state after the erasure, and
// other users, are repaired as always.
func TestSweepDoesNotResurrectAnErasedUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	gone := receipt.Key{User: "gone", Channel: "c1"}
	other := receipt.Key{User: "other", Channel: "c1"}
	_, err := cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{state("gone", "c1", 5, true), state("gone", "c2", 6, true), state("other", "c1", 7, true)})
	require.NoError(t, err)
	_, err = members.NewStore(bd.pg, nil).WritePG(ctx, []channel.Membership{channel.Join(gone, 1, 1000, 1)})
	require.NoError(t, err)
	_, err = mentions.NewStore(bd.pg, nil).WritePG(ctx, []channel.Mentions{{Key: gone, Seqs: []int64{3}}})
	require.NoError(t, err)

	// The gateway erased the user (Redis); Postgres still has the rows.
	ts, err := bd.rs.Erase(ctx, "gone", 50_000, 0, kind.ErasedHashes(kinds.All(), &kind.Env{Redis: bd.rs}, "gone"), nil)
	require.NoError(t, err)
	sw, err := drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, PagesPerSecond: 1000})
	require.NoError(t, err)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, rep.Erased, "two cursors, a register and a mention set wait for the persister: %+v", rep)
	_, ok := redisState(t, bd.rs, gone)
	require.False(t, ok, "not copied back into Redis")
	regs, _, err := members.NewStore(nil, bd.rs).Memberships(ctx, "gone", nil)
	require.NoError(t, err)
	require.Empty(t, regs)
	_, ok = redisState(t, bd.rs, other)
	require.True(t, ok, "another user is repaired as always")

	// The persister applies the erasure; a row the erasure missed (a
	// replica's write racing it), older than the erasure, stays out of
	// Redis; the user's new state is repaired both ways.
	_, _, err = bd.pg.Erase(ctx, ts, kind.PGErasure(kinds.All()).And(readby.MoveLogErasure))
	require.NoError(t, err)
	_, err = cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{state("gone", "c1", 5, true)})
	require.NoError(t, err)
	fresh := state("gone", "c9", 2, true)
	fresh.UpdatedAtUnixMs = 90_000
	// Accepted within the clock skew after the erasure (stamped with its
	// generation, so the persister wrote it): Redis lost it, and gets it
	// back.
	within := state("gone", "c8", 3, true)
	within.UpdatedAtUnixMs = 50_000 + tombstone.ClockSkew.Milliseconds()/2
	_, err = cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{fresh, within})
	require.NoError(t, err)
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Erased, "%+v", rep)
	_, ok = redisState(t, bd.rs, gone)
	require.False(t, ok)
	got, ok := redisState(t, bd.rs, fresh.Key)
	require.True(t, ok, "the user's state after the erasure is repaired")
	require.Equal(t, int64(2), got.Read.Position.Seq)
	got, ok = redisState(t, bd.rs, within.Key)
	require.True(t, ok, "a write within the clock skew after the erasure is repaired into Redis")
	require.Equal(t, int64(3), got.Read.Position.Seq)
}
