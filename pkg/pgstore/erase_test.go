package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/parked"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// kindTable stands for the table of a kind that owns its storage (a
// folder below pkg/kinds): the erasure deletes its rows by the kind's
// statement (erasure's Deletes).
const kindTable = "kind_rows"

// kindSenders stands for a kind's table whose rows name a user but are
// not the user's (a group mention's sender): the erasure redacts them by
// the kind's statement (erasure's Redacts).
const kindSenders = "kind_senders"

// erasure is the kinds' statements as the real kinds bring them: the
// cursors' and the membership registers' channels and deletes, the move
// log's delete through the channels, a redaction of kindSenders.
var erasure = pgstore.Erasure{
	Channels: []string{`SELECT channel_id FROM read_receipts WHERE user_id = $1`, `SELECT channel_id FROM channel_members WHERE user_id = $1`},
	Deletes: []string{`DELETE FROM ` + kindTable + ` WHERE user_id = $1`, `DELETE FROM read_receipts WHERE user_id = $1`,
		`DELETE FROM channel_members WHERE user_id = $1`},
	ChannelDeletes: []string{`DELETE FROM cursor_moves WHERE user_id = $1 AND channel_id = ANY($2)`},
	Redacts:        []string{`UPDATE ` + kindSenders + ` SET sender_id = '' WHERE channel_id = ANY($2) AND sender_id = $1`},
}

// erasedTables are the tables erasure deletes a user's rows from.
var erasedTables = []string{"read_receipts", "cursor_moves", "channel_members", kindTable}

// withKindTable creates kindTable in the schema.
func withKindTable(t *testing.T, s *pgstore.Store) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), `CREATE TABLE `+kindTable+` (user_id text NOT NULL, channel_id text NOT NULL);
CREATE TABLE `+kindSenders+` (channel_id text NOT NULL, sender_id text NOT NULL)`)
	require.NoError(t, err)
}

// seedUser writes a user's rows in every table of erasedTables.
func seedUser(t *testing.T, s *pgstore.Store, user string) {
	t.Helper()
	ctx := context.Background()
	for _, ch := range []string{"c1", "c2"} {
		k := receipt.Key{User: user, Channel: ch}
		// Rows as their kinds write them (the driver names no kind).
		_, err := s.Pool().Exec(ctx, `INSERT INTO read_receipts (user_id, channel_id, read_seq, read_message_id, delivered_seq, delivered_message_id) VALUES ($1, $2, 5, 'm5', 5, 'm5')`, k.User, k.Channel)
		require.NoError(t, err)
		_, err = s.Pool().Exec(ctx, `INSERT INTO channel_members (channel_id, user_id, member, version_seq, version_ms, join_seq) VALUES ($1, $2, true, 1, 1000, 1)`, k.Channel, k.User)
		require.NoError(t, err)
		_, err = s.Pool().Exec(ctx, `INSERT INTO cursor_moves (channel_id, user_id, kind, epoch, seq, at) VALUES ($1, $2, 'r', 0, 5, now())`, ch, user)
		require.NoError(t, err)
		_, err = s.Pool().Exec(ctx, `INSERT INTO `+kindTable+` (user_id, channel_id) VALUES ($1, $2)`, user, ch)
		require.NoError(t, err)
	}
}

// withMovePartition gives the schema's cursor-move log a default
// partition (the persister's maintenance creates the weekly ones).
func withMovePartition(t *testing.T, s *pgstore.Store) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), `CREATE TABLE cursor_moves_any PARTITION OF cursor_moves DEFAULT`)
	require.NoError(t, err)
}

// userRows counts a user's rows in every table of erasedTables.
func userRows(t *testing.T, s *pgstore.Store, user string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range erasedTables {
		var n int
		require.NoError(t, s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE user_id = $1`, user).Scan(&n))
		out[table] = n
	}
	return out
}

func TestEraseDeletesEveryTableOnceAndKeepsTheTombstone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	withMovePartition(t, s)
	withKindTable(t, s)
	seedUser(t, s, "gone")
	seedUser(t, s, "kept")
	want := userRows(t, s, "kept")
	for table, n := range want {
		require.Positive(t, n, "seeded %s", table)
	}

	ts := tombstone.Tombstone{User: "gone", Generation: 10, ErasedAtUnixMs: 10}
	deleted, advanced, err := s.Erase(ctx, ts, erasure)
	require.NoError(t, err)
	require.True(t, advanced)
	require.Equal(t, int64(2+2+2+2), deleted, "cursors, registers, cursor moves, a kind's rows")
	for table, n := range userRows(t, s, "gone") {
		require.Zero(t, n, "erased user's rows in %s", table)
	}
	require.Equal(t, want, userRows(t, s, "kept"), "another user is untouched")

	// The user comes back; the same or an older erasure applied again
	// (a replay) deletes nothing.
	seedUser(t, s, "gone")
	for _, again := range []tombstone.Tombstone{ts, {User: "gone", Generation: 9, ErasedAtUnixMs: 99}} {
		deleted, advanced, err = s.Erase(ctx, again, erasure)
		require.NoError(t, err)
		require.False(t, advanced)
		require.Zero(t, deleted)
	}
	require.Equal(t, want, userRows(t, s, "gone"))

	// The same generation at a later time (the erasure's record, after a
	// persister applied it from a stamped event) moves the time and
	// deletes nothing: the rows are the user's after that erasure.
	ts.ErasedAtUnixMs = 15
	deleted, advanced, err = s.Erase(ctx, ts, erasure)
	require.NoError(t, err)
	require.True(t, advanced, "the time moved")
	require.Zero(t, deleted)
	require.Equal(t, want, userRows(t, s, "gone"))

	got, err := s.Tombstones(ctx, []string{"gone", "kept", "never"})
	require.NoError(t, err)
	require.Equal(t, tombstone.Set{"gone": ts}, got)
	one, err := s.Tombstone(ctx, "kept")
	require.NoError(t, err)
	require.True(t, one.IsZero())

	// A later erasure deletes again.
	later := tombstone.Tombstone{User: "gone", Generation: 11, ErasedAtUnixMs: 20}
	_, advanced, err = s.Erase(ctx, later, erasure)
	require.NoError(t, err)
	require.True(t, advanced)
	one, err = s.Tombstone(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, later, one)
	require.Zero(t, userRows(t, s, "gone")["read_receipts"])
}

func TestEraseRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	withMovePartition(t, s)
	withKindTable(t, s)
	seedUser(t, s, "u")
	for _, bad := range []tombstone.Tombstone{
		{User: "", Generation: 1},
		{User: string(make([]byte, receipt.MaxIDLength+1)), Generation: 1},
		{User: "u", Generation: 0},
	} {
		_, _, err := s.Erase(ctx, bad, erasure)
		require.Error(t, err)
	}
	require.Equal(t, 2, userRows(t, s, "u")["read_receipts"], "nothing deleted")
	_, err := s.Tombstones(ctx, make([]string, pgstore.MaxTombstoneLookup+1))
	require.ErrorContains(t, err, "the limit is")
}

// The erasure clock moves only with an erasure that advances its
// tombstone, and a settled read waits for an erasure in progress (holding
// the clock's row) to commit: what lets a writer know, after its rows
// committed, whether an erasure ran between its tombstone lookup and them.
func TestErasureClockOrdersWritersAgainstErasures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	withMovePartition(t, s)
	withKindTable(t, s)
	seedUser(t, s, "gone")

	before, err := s.ErasureClock(ctx)
	require.NoError(t, err)
	ts := tombstone.Tombstone{User: "gone", Generation: 10, ErasedAtUnixMs: 10}
	_, advanced, err := s.Erase(ctx, ts, erasure)
	require.NoError(t, err)
	require.True(t, advanced)
	after, err := s.ErasureClockSettled(ctx)
	require.NoError(t, err)
	require.Equal(t, before+1, after)
	_, advanced, err = s.Erase(ctx, ts, erasure)
	require.NoError(t, err)
	require.False(t, advanced)
	again, err := s.ErasureClock(ctx)
	require.NoError(t, err)
	require.Equal(t, after, again, "an erasure that does not advance leaves the clock")

	// An erasure in progress: the settled read waits for its commit and
	// returns the count it raised.
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `UPDATE erasure_clock SET erasures = erasures + 1`)
	require.NoError(t, err)
	settled := make(chan int64, 1)
	go func() {
		n, err := s.ErasureClockSettled(ctx)
		if err != nil {
			n = -1
		}
		settled <- n
	}()
	// The reader is blocked on the row lock (pg_locks shows it waiting)
	// until the transaction commits.
	require.Eventually(t, func() bool {
		var waiting bool
		err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM erasure_clock FOR SHARE%' AND datname = current_database())`).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 10*time.Millisecond)
	require.Empty(t, settled, "the settled read returned while an erasure held the clock")
	unsettled, err := s.ErasureClock(ctx)
	require.NoError(t, err)
	require.Equal(t, after, unsettled, "a plain read sees the committed count")
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, after+1, <-settled)
}

// EraseAgain deletes what was written for an erased user after the
// erasure's deletes, and keeps the tombstone.
func TestEraseAgainDeletesRowsWrittenAfterTheErasure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	withMovePartition(t, s)
	withKindTable(t, s)
	ts := tombstone.Tombstone{User: "gone", Generation: 10, ErasedAtUnixMs: 10}
	_, _, err := s.Erase(ctx, ts, erasure)
	require.NoError(t, err)
	seedUser(t, s, "gone")
	seedUser(t, s, "kept")
	want := userRows(t, s, "kept")
	clock, err := s.ErasureClock(ctx)
	require.NoError(t, err)

	deleted, err := s.EraseAgain(ctx, "gone", erasure)
	require.NoError(t, err)
	require.Equal(t, int64(2+2+2+2), deleted)
	for table, n := range userRows(t, s, "gone") {
		require.Zero(t, n, "erased user's rows in %s", table)
	}
	require.Equal(t, want, userRows(t, s, "kept"))
	one, err := s.Tombstone(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, ts, one)
	now, err := s.ErasureClock(ctx)
	require.NoError(t, err)
	require.Equal(t, clock, now)
}

// An erasure leaves no sender of a kind's rows (erasure's Redacts, in the
// user's channels) and no parked dead letter of the user
// (pgstore.RedactedColumns; pkg/kinds checks that every column that may
// name a user is erased or redacted).
func TestErasureRedactsWhatNamesAUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	withMovePartition(t, s)
	withKindTable(t, s)
	seedUser(t, s, "gone")
	_, err := s.Pool().Exec(ctx, `INSERT INTO `+kindSenders+` VALUES ('c1', 'gone'), ('c1', 'other')`)
	require.NoError(t, err)
	for _, key := range []string{"gone:c1", "u::gone", "gonex:c1"} {
		_, err = parked.New(s).Park(ctx, parked.Record{Reason: "test", SourceOffset: -1, SourcePartition: -1, Key: []byte(key), Value: []byte("v")})
		require.NoError(t, err)
	}
	_, _, err = s.Erase(ctx, tombstone.Tombstone{User: "gone", Generation: 10, ErasedAtUnixMs: 10}, erasure)
	require.NoError(t, err)
	rows, err := s.Pool().Query(ctx, `SELECT sender_id FROM `+kindSenders+` ORDER BY sender_id`)
	require.NoError(t, err)
	senders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"", "other"}, senders, "the row stays, without its sender")
	var named, others int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE record_key IN ('gone:c1'::bytea, 'u::gone'::bytea) OR record_value IS NOT NULL AND reason = 'erased'),
		count(*) FILTER (WHERE record_key = 'gonex:c1'::bytea) FROM parked_dead_letters`).Scan(&named, &others))
	require.Zero(t, named, "the user's parked letters are redacted")
	require.Equal(t, 1, others, "another user's are not")
}
