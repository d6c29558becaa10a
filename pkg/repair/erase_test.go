package repair_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/repair"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Dead letters of an erased user: one that predates the erasure is
// dropped from both stores; the erasure's own letter deletes the Postgres
// rows; one after it is repaired into both, once Postgres has caught up
// with the erasure Redis already holds (so no old row merges back).
func TestRepairRespectsErasures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, rs.Load(ctx))
	r := &repair.Repairer{Postgres: pg, Redis: rs}
	k := receipt.Key{User: "gone", Channel: "c"}
	read := func(seq, at, gen int64) event.Decoded {
		st := receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: seq}}, UpdatedAtUnixMs: at}
		st, _ = receipt.Merge(receipt.State{}, st)
		return event.Decoded{Key: k, Receipt: &st, Generation: gen}
	}
	require.NoError(t, r.RepairDecoded(ctx, read(9, 1_000, 0)))

	// The gateway erases the user; Postgres has not applied it yet.
	ts, err := rs.Erase(ctx, "gone", 100_000, 0, kind.ErasedHashes(kinds.All(), &kind.Env{Redis: rs}, "gone"), nil)
	require.NoError(t, err)
	// A letter from before the erasure: dropped, and Postgres caught up.
	require.NoError(t, r.RepairDecoded(ctx, read(12, 99_000, 0)))
	rows, err := cursors.NewPostgres(pg).Get(ctx, "gone", nil)
	require.NoError(t, err)
	require.Empty(t, rows, "Postgres applied the erasure Redis holds")
	got, err := pg.Tombstone(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, ts, got)
	states, _, err := cursors.NewStore(rs).Get(ctx, "gone", nil)
	require.NoError(t, err)
	require.Empty(t, states)

	// After it: repaired into both stores (the user starts over).
	require.NoError(t, r.RepairDecoded(ctx, read(2, 99_000, ts.Generation)))
	rows, err = cursors.NewPostgres(pg).Get(ctx, "gone", nil)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, int64(2), rows[0].Read.Position.Seq)
	states, _, err = cursors.NewStore(rs).Get(ctx, "gone", nil)
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, int64(2), states[0].Read.Position.Seq)

	// The erasure's own letter, replayed late, deletes nothing new; a
	// newer one (another erasure) deletes the Postgres rows.
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Erasure: &ts}))
	rows, err = cursors.NewPostgres(pg).Get(ctx, "gone", nil)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	later := tombstone.Tombstone{User: "gone", Generation: ts.Generation + 1, ErasedAtUnixMs: 200_000}
	require.NoError(t, r.RepairDecoded(ctx, event.Decoded{Erasure: &later}))
	rows, err = cursors.NewPostgres(pg).Get(ctx, "gone", nil)
	require.NoError(t, err)
	require.Empty(t, rows)
}
