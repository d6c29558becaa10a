package cursors_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

func st(user, ch string, rs, ds int64, msg string) receipt.State {
	return receipt.State{
		Key:       receipt.Key{User: user, Channel: ch},
		Read:      receipt.Cursor{Position: receipt.Position{Seq: rs}, MessageID: msg},
		Delivered: receipt.Cursor{Position: receipt.Position{Seq: max(ds, rs)}, MessageID: msg},
		DeviceID:  "dev", UpdatedAtUnixMs: 1000,
	}
}

func TestUpsertIsMaxRegister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cursors.NewPostgres(pgtest.NewSchema(t).Store)

	n, err := s.Upsert(ctx, []receipt.State{st("u1", "c1", 10, 0, "m10"), st("u1", "c2", 0, 5, "")})
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	// Older read, newer delivered: read stays, delivered advances, and each
	// message id stays with its own seq.
	older := st("u1", "c1", 7, 0, "m7")
	older.Delivered = receipt.Cursor{Position: receipt.Position{Seq: 12}, MessageID: "m12"}
	n, err = s.Upsert(ctx, []receipt.State{older})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	// A duplicate changes nothing (no dead tuple).
	n, err = s.Upsert(ctx, []receipt.State{older})
	require.NoError(t, err)
	require.EqualValues(t, 0, n)

	got, err := s.Get(ctx, "u1", nil)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, int64(10), got[0].Read.Position.Seq)
	require.Equal(t, "m10", got[0].Read.MessageID)
	require.Equal(t, int64(12), got[0].Delivered.Position.Seq)
	require.Equal(t, "m12", got[0].Delivered.MessageID)

	// A read of a higher epoch and a lower seq (an older build's
	// mark-unread) wins the user's own position only: the public read is
	// the greatest by seq.
	e := st("u1", "c1", 3, 0, "m3")
	e.Read.Position.Epoch = 1
	_, err = s.Upsert(ctx, []receipt.State{e})
	require.NoError(t, err)
	got, err = s.Get(ctx, "u1", []string{"c1"})
	require.NoError(t, err)
	require.Equal(t, receipt.Position{Seq: 10}, got[0].Read.Position)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 3}, got[0].EffectiveRead())
}

// Mark-unread in Postgres: the private read moves to the next epoch, the
// public read never moves back, the same mark-unread again writes nothing,
// and a stale read of the old epoch moves the public read only; every step
// agrees with receipt.Merge.
func TestUpsertMarkUnreadIsPrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cursors.NewPostgres(pgtest.NewSchema(t).Store)
	k := receipt.Key{User: "u1", Channel: "c1"}
	read := func(epoch, seq int64) receipt.State {
		r := st(k.User, k.Channel, seq, 0, "m"+strconv.FormatInt(seq, 10))
		r.Read.Position.Epoch = epoch
		return r
	}
	var model receipt.State
	step := func(in receipt.State, wantRows int64) receipt.State {
		t.Helper()
		n, err := s.Upsert(ctx, []receipt.State{in})
		require.NoError(t, err)
		require.EqualValues(t, wantRows, n, "%+v", in)
		var moved bool
		model, moved = receipt.Merge(model, in)
		require.Equal(t, wantRows == 1, moved, "Postgres and receipt.Merge agree on moving: %+v", in)
		got, err := s.Get(ctx, k.User, []string{k.Channel})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.True(t, got[0].SameCursors(model), "Postgres %+v, receipt.Merge %+v", got[0], model)
		return got[0]
	}
	step(read(0, 10), 1)
	got := step(receipt.MarkUnread(k, 6, 0), 1)
	require.Equal(t, receipt.Position{Seq: 10}, got.Read.Position, "others still see the read at 10")
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 5}, got.EffectiveRead())
	step(receipt.MarkUnread(k, 6, 0), 0) // the retry: nothing written
	step(read(0, 8), 0)                  // a stale ack behind both
	got = step(read(0, 12), 1)           // a stale ack past the public read
	require.Equal(t, receipt.Position{Seq: 12}, got.Read.Position)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 5}, got.EffectiveRead(), "a stale ack does not undo the mark-unread")
	got = step(read(1, 7), 1)
	require.Equal(t, receipt.Position{Seq: 12}, got.Read.Position)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 7}, got.EffectiveRead())
	got = step(read(1, 13), 1)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 13}, got.Read.Position)
	require.True(t, got.PrivateRead.Position.IsZero())
	got = step(read(0, 14), 1) // after the read caught up: the own position stays
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 13}, got.EffectiveRead())
	require.Equal(t, receipt.Position{Seq: 14}, got.Read.Position)
}

func TestRejectedDataIsClassified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cursors.NewPostgres(pgtest.NewSchema(t).Store)
	bad := st("u1", "c1", -5, 0, "")
	_, err := s.Upsert(ctx, []receipt.State{bad})
	require.ErrorIs(t, err, pgstore.ErrRejected)
	require.Equal(t, errclass.Rejected, pgstore.Classify(err))
}

func TestClassifyKeepsThePgError(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewSchema(t).Store
	s := cursors.NewPostgres(pg)
	_, err := pg.Pool().Exec(context.Background(), `SELECT * FROM no_such_table`)
	require.Error(t, err)
	_, err = s.Upsert(context.Background(), []receipt.State{st("u", "c", -1, 0, "")})
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "the *pgconn.PgError stays in the chain")
	require.Equal(t, "23514", pgErr.Code)
}

// UpsertBulk is the same max-register as Upsert: new rows are COPYed in,
// existing ones advance only where the incoming cursor is greater, and the
// count says how many rows changed.
func TestUpsertBulkIsTheSameMaxRegister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cursors.NewPostgres(pgtest.NewSchema(t).Store)
	_, err := s.Upsert(ctx, []receipt.State{st("b", "c1", 10, 10, "m10"), st("b", "c2", 10, 10, "m10")})
	require.NoError(t, err)

	priv := func(s receipt.State, e, seq int64) receipt.State {
		s.PrivateRead = receipt.Cursor{Position: receipt.Position{Epoch: e, Seq: seq}}
		return s
	}
	batch := []receipt.State{
		st("b", "c1", 12, 12, "m12"),          // existing, advances
		priv(st("b", "c2", 7, 7, "m7"), 0, 8), // existing: stale read, private read ahead of the stored read
		st("a", "c1", 3, 5, "m3"),             // new (and out of key order)
		priv(st("z", "c9", 1, 1, "m1"), 1, 0), // new, private read at the next epoch
	}
	n, err := s.UpsertBulk(ctx, batch)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "two inserts and one advance; a private read behind the stored read changes nothing")
	got := map[receipt.Key]receipt.State{}
	for _, u := range []string{"a", "b", "z"} {
		rows, err := s.Get(ctx, u, nil)
		require.NoError(t, err)
		for _, r := range rows {
			got[r.Key] = r
		}
	}
	require.Len(t, got, 4)
	require.Equal(t, int64(12), got[receipt.Key{User: "b", Channel: "c1"}].Read.Position.Seq)
	require.Equal(t, "m12", got[receipt.Key{User: "b", Channel: "c1"}].Read.MessageID)
	require.Equal(t, int64(10), got[receipt.Key{User: "b", Channel: "c2"}].Read.Position.Seq)
	require.Equal(t, int64(5), got[receipt.Key{User: "a", Channel: "c1"}].Delivered.Position.Seq)
	require.Equal(t, receipt.Position{Seq: 10}, got[receipt.Key{User: "b", Channel: "c2"}].EffectiveRead(), "a private read behind the stored read is dropped")
	require.Equal(t, receipt.Position{Epoch: 1}, got[receipt.Key{User: "z", Channel: "c9"}].EffectiveRead(), "COPY carries the private read")

	// Rejected data is classified as from Upsert.
	_, err = s.UpsertBulk(ctx, []receipt.State{st("n", "c", -1, 0, "")})
	require.ErrorIs(t, err, pgstore.ErrRejected)
}

// UpsertBulkGuessed takes the caller's word for which keys have a row: a
// right guess COPYs the rest without asking; a wrong one (a row the caller
// did not know of) is merged by the upsert, says so, and is still a
// max-register.
func TestUpsertBulkGuessedFallsBackOnAMiss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cursors.NewPostgres(pgtest.NewSchema(t).Store)
	_, err := s.Upsert(ctx, []receipt.State{st("b", "c1", 10, 10, "m10")})
	require.NoError(t, err)
	known := func(k receipt.Key) bool { return k == receipt.Key{User: "b", Channel: "c1"} }

	n, missed, err := s.UpsertBulkGuessed(ctx, []receipt.State{st("b", "c1", 12, 12, "m12"), st("a", "c1", 3, 3, "m3")}, known)
	require.NoError(t, err)
	require.False(t, missed)
	require.EqualValues(t, 2, n)

	nobody := func(receipt.Key) bool { return false }
	n, missed, err = s.UpsertBulkGuessed(ctx, []receipt.State{st("b", "c1", 11, 11, "m11"), st("a", "c1", 4, 4, "m4"), st("z", "c1", 1, 1, "m1")}, nobody)
	require.NoError(t, err)
	require.True(t, missed, "b/c1 and a/c1 have rows")
	require.EqualValues(t, 2, n, "a/c1 advances, z/c1 is new, b/c1 is stale")
	for k, want := range map[receipt.Key]int64{{User: "b", Channel: "c1"}: 12, {User: "a", Channel: "c1"}: 4, {User: "z", Channel: "c1"}: 1} {
		got, err := s.Get(ctx, k.User, []string{k.Channel})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, want, got[0].Read.Position.Seq, "%v", k)
	}
}

// GetKeys answers the rows of keys of any users at once, as Get answers
// each user's, and leaves out keys without a row.
func TestGetKeysIsGetForManyUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cursors.NewPostgres(pgtest.NewSchema(t).Store)
	_, err := s.Upsert(ctx, []receipt.State{st("a", "c1", 3, 0, "m3"), st("a", "c2", 4, 0, "m4"), st("b", "c1", 5, 0, "m5")})
	require.NoError(t, err)
	got, err := s.GetKeys(ctx, []receipt.Key{{User: "a", Channel: "c2"}, {User: "b", Channel: "c1"}, {User: "b", Channel: "none"}, {User: "z", Channel: "c1"}})
	require.NoError(t, err)
	require.Len(t, got, 2)
	byKey := map[receipt.Key]receipt.State{}
	for _, g := range got {
		byKey[g.Key] = g
	}
	for _, k := range []receipt.Key{{User: "a", Channel: "c2"}, {User: "b", Channel: "c1"}} {
		want, err := s.Get(ctx, k.User, []string{k.Channel})
		require.NoError(t, err)
		require.Equal(t, want[0], byKey[k])
	}
	none, err := s.GetKeys(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

// TestEpochBoundedInPostgres: an epoch past receipt.MaxEpoch is rejected
// by the table (a data error, dead-lettered), whichever path writes it.
func TestEpochBoundedInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cursors.NewPostgres(pgtest.NewSchema(t).Store)
	at := func(ch string, epoch int64) []receipt.State {
		x := st("u1", ch, 3, 3, "")
		x.Read.Position.Epoch = epoch
		return []receipt.State{x}
	}
	_, err := s.Upsert(ctx, at("c1", receipt.MaxEpoch))
	require.NoError(t, err)
	_, err = s.Upsert(ctx, at("c2", receipt.MaxEpoch+1))
	require.ErrorIs(t, err, pgstore.ErrRejected)
}
