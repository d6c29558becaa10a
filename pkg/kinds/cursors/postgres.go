package cursors

import (
	"context"
	_ "embed"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// The erasure's statements (the Spec's PGErase and PGChannels).
var (
	//go:embed erase.sql
	eraseSQL string
	//go:embed channels.sql
	channelsSQL string
)

// Table is the cursors' table (sql/migrations): one row per (user,
// channel), its primary key in that order. A statement of a view or a
// change feed that joins it names it through kind.ComposeSQL.
const Table = "read_receipts"

// Postgres is the cursors' table, read_receipts.
type Postgres struct{ pg *pgstore.Store }

// NewPostgres is the cursors' table on a Postgres driver.
func NewPostgres(pg *pgstore.Store) Postgres { return Postgres{pg: pg} }

// readSetSQL merges the read cursors as receipt.Merge: the public read
// takes the incoming (epoch, seq, message id) only when it is greater by
// (seq, epoch), so others never see it move back; the private read column
// keeps the (epoch, seq)-greatest of both sides' reads and private reads
// (the user's own position: its epoch the greatest, its seq the greatest
// of those at that epoch), and readers drop it when it is not ahead of the
// read cursor (receipt.State.Canonical).
const readSetSQL = `
    read_epoch      = CASE WHEN (excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch) THEN excluded.read_epoch ELSE t.read_epoch END,
    read_seq        = CASE WHEN (excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch) THEN excluded.read_seq ELSE t.read_seq END,
    read_message_id = CASE WHEN (excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch) THEN excluded.read_message_id ELSE t.read_message_id END,
    private_read_epoch = ` + ownEpochSQL + `,
    private_read_seq   = GREATEST(
        CASE WHEN t.private_read_epoch = ` + ownEpochSQL + ` THEN t.private_read_seq END,
        CASE WHEN t.read_epoch = ` + ownEpochSQL + ` THEN t.read_seq END,
        CASE WHEN excluded.private_read_epoch = ` + ownEpochSQL + ` THEN excluded.private_read_seq END,
        CASE WHEN excluded.read_epoch = ` + ownEpochSQL + ` THEN excluded.read_seq END),`

// ownEpochSQL is the epoch of the user's own position after a merge.
const ownEpochSQL = `GREATEST(t.private_read_epoch, t.read_epoch, excluded.private_read_epoch, excluded.read_epoch)`

// readMovedSQL says whether the incoming row moves the stored read
// cursors, as receipt.Merge's moved: the public read advances by (seq,
// epoch), or the incoming read or private read is ahead of the user's own
// position (the greater by (epoch, seq) of the stored read and private
// read).
const readMovedSQL = `(excluded.read_seq, excluded.read_epoch) > (t.read_seq, t.read_epoch)
    OR ((excluded.read_epoch, excluded.read_seq) > (t.read_epoch, t.read_seq)
        AND (excluded.read_epoch, excluded.read_seq) > (t.private_read_epoch, t.private_read_seq))
    OR ((excluded.private_read_epoch, excluded.private_read_seq) > (t.private_read_epoch, t.private_read_seq)
        AND (excluded.private_read_epoch, excluded.private_read_seq) > (t.read_epoch, t.read_seq))`

// mergeSetSQL is the conflict clause of every upsert. Each cursor is a
// max-register: it takes the incoming (epoch, seq, message id) only when
// the incoming tuple is greater (the reads as readSetSQL), so the id never
// pairs with the wrong seq. Delivered needs no "reading implies delivery"
// here: every row written already satisfies it (receipt.Merge), and the
// max of two such rows does too. The WHERE skips rows where nothing
// advances, which avoids a dead tuple per duplicate. Rows must be unique
// per key (ON CONFLICT cannot touch a row twice in one statement): callers
// dedupe first.
const mergeSetSQL = `
ON CONFLICT (user_id, channel_id) DO UPDATE SET` + readSetSQL + `
    delivered_epoch      = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_epoch ELSE t.delivered_epoch END,
    delivered_seq        = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_seq ELSE t.delivered_seq END,
    delivered_message_id = CASE WHEN (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq) THEN excluded.delivered_message_id ELSE t.delivered_message_id END,
    device_id  = excluded.device_id,
    updated_at = GREATEST(t.updated_at, excluded.updated_at)
WHERE ` + readMovedSQL + `
   OR (excluded.delivered_epoch, excluded.delivered_seq) > (t.delivered_epoch, t.delivered_seq)`

// upsertSQL writes a batch in one statement from parameter arrays: the
// path for small batches (one round trip, no transaction of its own).
const upsertSQL = `
INSERT INTO read_receipts AS t (user_id, channel_id, read_epoch, read_seq, read_message_id,
    delivered_epoch, delivered_seq, delivered_message_id, device_id, updated_at,
    private_read_epoch, private_read_seq)
SELECT u, c, re, rs, rm, de, ds, dm, dev, to_timestamp(ts / 1000.0), pe, ps
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[],
            $6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::bigint[],
            $11::bigint[], $12::bigint[])
     AS x(u, c, re, rs, rm, de, ds, dm, dev, ts, pe, ps)` + mergeSetSQL

// joinKeysSQL joins read_receipts (as t) with the keys of keyArrays ($1
// users, $2 channels): a statement for a whole set of keys of any users.
const joinKeysSQL = `JOIN unnest($1::text[], $2::text[]) AS k(u, c) ON t.user_id = k.u AND t.channel_id = k.c`

// keyArrays are the user and channel arrays of n keys, for joinKeysSQL.
func keyArrays(n int, key func(i int) receipt.Key) (users, channels []string) {
	users, channels = make([]string, n), make([]string, n)
	for i := range n {
		k := key(i)
		users[i], channels[i] = k.User, k.Channel
	}
	return users, channels
}

// existingSQL returns which of the given keys have a row.
const existingSQL = `SELECT t.user_id, t.channel_id FROM read_receipts t ` + joinKeysSQL

// CopyColumns are read_receipts' columns as UpsertBulk COPYs them, in the
// order of CopyRow's values (benchmark baselines COPY with both).
var CopyColumns = []string{"user_id", "channel_id", "read_epoch", "read_seq", "read_message_id",
	"delivered_epoch", "delivered_seq", "delivered_message_id", "device_id", "updated_at",
	"private_read_epoch", "private_read_seq"}

// CopyRow is st's row in CopyColumns order; a state without an update
// time is stamped now.
func CopyRow(st receipt.State, now time.Time) []any {
	at := now
	if st.UpdatedAtUnixMs > 0 {
		at = time.UnixMilli(st.UpdatedAtUnixMs)
	}
	return []any{st.Key.User, st.Key.Channel,
		st.Read.Position.Epoch, st.Read.Position.Seq, st.Read.MessageID,
		st.Delivered.Position.Epoch, st.Delivered.Position.Seq, st.Delivered.MessageID,
		st.DeviceID, at, st.PrivateRead.Position.Epoch, st.PrivateRead.Position.Seq}
}

// UpsertBulk merges states into read_receipts like Upsert, for batches of
// thousands of rows, in one transaction: it asks which keys already have a
// row, COPYs the new rows in key order (COPY inserts many rows per page
// and WAL record; in key order each lands next to the last, which is why
// it beats a COPY of the same rows in random order), and merges the
// existing ones with Upsert's statement. A row inserted by someone else
// between the question and the COPY fails the COPY with a unique
// violation; the batch is then merged by Upsert's statement alone.
func (s Postgres) UpsertBulk(ctx context.Context, states []receipt.State) (int64, error) {
	n, _, err := s.upsertBulk(ctx, states, nil)
	return n, err
}

// UpsertBulkGuessed is UpsertBulk for a caller that knows keys with a row
// (hasRow: those it wrote itself; rows go away only by an erasure, and a
// key believed to have a row is merged by Upsert's statement, which is
// right either way): it COPYs every other key without asking Postgres,
// which saves the question (about a third of a fresh batch's time). A
// wrong guess, a key with a row the caller did not know of, fails the COPY
// with a unique violation before anything is written; the batch is then
// merged by Upsert's statement, and missed is true so that the caller can
// ask first for a while.
func (s Postgres) UpsertBulkGuessed(ctx context.Context, states []receipt.State, hasRow func(receipt.Key) bool) (n int64, missed bool, err error) {
	return s.upsertBulk(ctx, states, hasRow)
}

func (s Postgres) upsertBulk(ctx context.Context, states []receipt.State, hasRow func(receipt.Key) bool) (int64, bool, error) {
	if len(states) == 0 {
		return 0, false, nil
	}
	sorted := states
	if !slices.IsSortedFunc(states, receipt.CompareStates) {
		sorted = slices.Clone(states)
		slices.SortFunc(sorted, receipt.CompareStates)
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pg.Pool(), func(tx pgx.Tx) error {
		var err error
		n, err = upsertBulkTx(ctx, tx, sorted, hasRow)
		return err
	})
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
		n, err := s.Upsert(ctx, sorted)
		return n, true, err
	}
	return n, false, pgstore.Classified(err)
}

// existingKeys asks Postgres which of the sorted states' keys have a row.
func existingKeys(ctx context.Context, tx pgx.Tx, sorted []receipt.State) (func(receipt.Key) bool, error) {
	users, channels := keyArrays(len(sorted), func(i int) receipt.Key { return sorted[i].Key })
	rows, err := tx.Query(ctx, existingSQL, users, channels)
	if err != nil {
		return nil, err
	}
	existing := make(map[receipt.Key]struct{})
	var k receipt.Key
	_, err = pgx.ForEachRow(rows, []any{&k.User, &k.Channel}, func() error {
		existing[k] = struct{}{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return func(k receipt.Key) bool { _, ok := existing[k]; return ok }, nil
}

// upsertBulkTx COPYs the states whose key has no row (hasRow; nil: asked
// of Postgres) and merges the others with Upsert's statement.
func upsertBulkTx(ctx context.Context, tx pgx.Tx, sorted []receipt.State, hasRow func(receipt.Key) bool) (int64, error) {
	if hasRow == nil {
		var err error
		if hasRow, err = existingKeys(ctx, tx, sorted); err != nil {
			return 0, err
		}
	}
	fresh, old := splitByRow(sorted, hasRow)
	var n int64
	if len(fresh) > 0 {
		now := time.Now()
		copied, err := tx.CopyFrom(ctx, pgx.Identifier{"read_receipts"}, CopyColumns,
			pgx.CopyFromSlice(len(fresh), func(i int) ([]any, error) { return CopyRow(fresh[i], now), nil }))
		if err != nil {
			return 0, err
		}
		n += copied
	}
	if len(old) > 0 {
		m, err := upsert(ctx, tx, old)
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

// splitByRow splits sorted into the states whose key has no row and
// those whose key has one, keeping their order. States are large: the
// common all-fresh batch is returned as is, and otherwise each part is
// sized once (appending to empty slices copied a 25,000-row batch about
// twice over and left the copies to the GC).
func splitByRow(sorted []receipt.State, hasRow func(receipt.Key) bool) (fresh, old []receipt.State) {
	has := make([]bool, len(sorted))
	nOld := 0
	for i := range sorted {
		if hasRow(sorted[i].Key) {
			has[i] = true
			nOld++
		}
	}
	switch nOld {
	case 0:
		return sorted, nil
	case len(sorted):
		return nil, sorted
	}
	fresh, old = make([]receipt.State, 0, len(sorted)-nOld), make([]receipt.State, 0, nOld)
	for i := range sorted {
		if has[i] {
			old = append(old, sorted[i])
		} else {
			fresh = append(fresh, sorted[i])
		}
	}
	return fresh, old
}

// Upsert merges states into read_receipts in one statement, which is its
// own transaction (no BEGIN/COMMIT round trips); it returns how many rows
// changed (inserted or advanced). States must be unique per key; they are
// written in key order.
func (s Postgres) Upsert(ctx context.Context, states []receipt.State) (int64, error) {
	if len(states) == 0 {
		return 0, nil
	}
	n, err := upsert(ctx, s.pg.Pool(), states)
	return n, pgstore.Classified(err)
}

// UpsertTx is Upsert inside a caller's transaction.
func UpsertTx(ctx context.Context, tx pgx.Tx, states []receipt.State) (int64, error) {
	n, err := upsert(ctx, tx, states)
	return n, pgstore.Classified(err)
}

// execer is a pool, a connection or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func upsert(ctx context.Context, db execer, states []receipt.State) (int64, error) {
	sorted := states
	if !slices.IsSortedFunc(states, receipt.CompareStates) {
		// Rows in key order lock and insert in index order: fewer page
		// splits, and concurrent statements never wait on each other in a
		// cycle.
		sorted = slices.Clone(states)
		slices.SortFunc(sorted, receipt.CompareStates)
	}
	tag, err := db.Exec(ctx, upsertSQL, upsertArgs(sorted)...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

const selectColumns = `user_id, channel_id, read_epoch, read_seq, read_message_id,
    delivered_epoch, delivered_seq, delivered_message_id, device_id,
    (extract(epoch from updated_at) * 1000)::bigint, private_read_epoch, private_read_seq`

func scanState(row pgx.Row) (receipt.State, error) {
	var s receipt.State
	err := row.Scan(&s.Key.User, &s.Key.Channel,
		&s.Read.Position.Epoch, &s.Read.Position.Seq, &s.Read.MessageID,
		&s.Delivered.Position.Epoch, &s.Delivered.Position.Seq, &s.Delivered.MessageID,
		&s.DeviceID, &s.UpdatedAtUnixMs, &s.PrivateRead.Position.Epoch, &s.PrivateRead.Position.Seq)
	// The column keeps the greatest private position merged; the state
	// holds it only while it is ahead of the read cursor.
	return s.Canonical(), err
}

// Get returns a user's states, for all channels or the listed ones, in
// channel order.
func (s Postgres) Get(ctx context.Context, user string, channels []string) ([]receipt.State, error) {
	var rows pgx.Rows
	var err error
	if len(channels) == 0 {
		rows, err = s.pg.Pool().Query(ctx, `SELECT `+selectColumns+` FROM read_receipts WHERE user_id = $1 ORDER BY channel_id LIMIT $2`, user, pgstore.MaxChannelsPerRead)
	} else {
		rows, err = s.pg.Pool().Query(ctx, `SELECT `+selectColumns+` FROM read_receipts WHERE user_id = $1 AND channel_id = ANY($2) ORDER BY channel_id`, user, channels)
	}
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	return out, nil
}

// UserStatesAfter returns up to limit of a user's states with a channel
// after the given one ("" starts at the first), in channel order: a whole
// user read in bounded pages, however many channels it has.
func (s Postgres) UserStatesAfter(ctx context.Context, user, after string, limit int) ([]receipt.State, error) {
	rows, err := s.pg.Pool().Query(ctx, `SELECT `+selectColumns+` FROM read_receipts
		WHERE user_id = $1 AND channel_id > $2 ORDER BY channel_id LIMIT $3`, user, after, limit)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	return out, pgstore.Classified(err)
}

// UsersStates returns every state of the users, in (user, channel)
// order, up to limit rows in all; more reports that the limit cut it
// short (the caller pages those users with UserStatesAfter).
func (s Postgres) UsersStates(ctx context.Context, users []string, limit int) (states []receipt.State, more bool, err error) {
	rows, err := s.pg.Pool().Query(ctx, `SELECT `+selectColumns+` FROM read_receipts
		WHERE user_id = ANY($1) ORDER BY user_id, channel_id LIMIT $2`, users, limit+1)
	if err != nil {
		return nil, false, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	if err != nil {
		return nil, false, pgstore.Classified(err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// GetKeys returns the stored states of keys (any users, in no order; a
// key without a row is left out) in one statement: the drift sweep's
// lookup of a whole page of Redis keys, instead of a query per user.
func (s Postgres) GetKeys(ctx context.Context, keys []receipt.Key) ([]receipt.State, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	users, channels := keyArrays(len(keys), func(i int) receipt.Key { return keys[i] })
	rows, err := s.pg.Pool().Query(ctx, `SELECT `+selectColumns+` FROM read_receipts t `+joinKeysSQL, users, channels)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	return out, pgstore.Classified(err)
}

// Page returns up to limit states with keys strictly after the given key, in
// key order: the drift sweep's bounded walk. An empty after starts at the
// beginning.
func (s Postgres) Page(ctx context.Context, after receipt.Key, limit int) ([]receipt.State, error) {
	rows, err := s.pg.Pool().Query(ctx, `SELECT `+selectColumns+` FROM read_receipts
		WHERE (user_id, channel_id) > ($1, $2) ORDER BY user_id, channel_id LIMIT $3`, after.User, after.Channel, limit)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	return out, pgstore.Classified(err)
}

// Count returns the number of rows in read_receipts.
func (s Postgres) Count(ctx context.Context) (int64, error) {
	var n int64
	err := s.pg.Pool().QueryRow(ctx, `SELECT count(*) FROM read_receipts`).Scan(&n)
	return n, pgstore.Classified(err)
}

// ReadEpochs returns the current read epoch (the greater of the public
// and the private read cursor's) of each listed key that has a row: what
// a mark without an epoch applies at when Redis cannot resolve it.
func (s Postgres) ReadEpochs(ctx context.Context, keys []receipt.Key) (map[receipt.Key]int64, error) {
	users, chans := keyArrays(len(keys), func(i int) receipt.Key { return keys[i] })
	rows, err := s.pg.Pool().Query(ctx, `SELECT t.user_id, t.channel_id, GREATEST(t.read_epoch, t.private_read_epoch)
		FROM read_receipts t `+joinKeysSQL, users, chans)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	out := make(map[receipt.Key]int64, len(keys))
	var k receipt.Key
	var e int64
	_, err = pgx.ForEachRow(rows, []any{&k.User, &k.Channel, &e}, func() error {
		out[k] = e
		return nil
	})
	return out, pgstore.Classified(err)
}

// CursorChange is a public cursor that Postgres holds at exactly the
// position a write brought: the change feed's unit.
type CursorChange struct {
	Key receipt.Key
	// Delivered is true for the delivered cursor, false for the public read.
	Delivered bool
	Cursor    receipt.Cursor
	AtUnixMs  int64
}

// upsertChangesSQL is Upsert's statement, answering for every key the
// public cursors stored once it ran (the RETURNING of the rows it
// advanced, else the row as it was: one snapshot, so the unchanged rows
// read before the statement) and whether the user shares each kind
// (the settings kind's table; no row shares both).
var upsertChangesSQL = kind.ComposeSQL(`
WITH up AS (`+upsertSQL+`
RETURNING t.user_id, t.channel_id, t.read_epoch, t.read_seq, t.delivered_epoch, t.delivered_seq)
SELECT k.u, k.c,
       COALESCE(up.read_epoch, o.read_epoch, -1), COALESCE(up.read_seq, o.read_seq, -1),
       COALESCE(up.delivered_epoch, o.delivered_epoch, -1), COALESCE(up.delivered_seq, o.delivered_seq, -1),
       COALESCE(s.share_read, true), COALESCE(s.share_delivered, true)
FROM unnest($1::text[], $2::text[]) AS k(u, c)
LEFT JOIN up ON up.user_id = k.u AND up.channel_id = k.c
LEFT JOIN read_receipts o ON o.user_id = k.u AND o.channel_id = k.c
LEFT JOIN {settings} s ON s.user_id = k.u`, map[string]string{"settings": settings.Table})

// UpsertChanges is Upsert, also returning the change feed's entries: each
// public cursor (read, delivered; never the private read) of the states
// that Postgres holds at exactly the incoming position once the statement
// ran, for users who share that kind. So a move that advanced appears, a
// stale one (Postgres holds more) never does, and a replay of a move
// already written appears again: at least once, as a crash between the
// write and the feed's produce needs.
func (s Postgres) UpsertChanges(ctx context.Context, states []receipt.State) ([]CursorChange, error) {
	if len(states) == 0 {
		return nil, nil
	}
	sorted := states
	if !slices.IsSortedFunc(states, receipt.CompareStates) {
		sorted = slices.Clone(states)
		slices.SortFunc(sorted, receipt.CompareStates)
	}
	byKey := make(map[receipt.Key]receipt.State, len(sorted))
	for _, st := range sorted {
		byKey[st.Key] = st
	}
	rows, err := s.pg.Pool().Query(ctx, upsertChangesSQL, upsertArgs(sorted)...)
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	var (
		out                      []CursorChange
		k                        receipt.Key
		read, delivered          receipt.Position
		shareRead, shareDelivers bool
	)
	_, err = pgx.ForEachRow(rows, []any{&k.User, &k.Channel, &read.Epoch, &read.Seq, &delivered.Epoch, &delivered.Seq, &shareRead, &shareDelivers}, func() error {
		in := byKey[k]
		if shareRead && !in.Read.Position.IsZero() && in.Read.Position == read {
			out = append(out, CursorChange{Key: k, Cursor: in.Read, AtUnixMs: in.UpdatedAtUnixMs})
		}
		if shareDelivers && !in.Delivered.Position.IsZero() && in.Delivered.Position == delivered {
			out = append(out, CursorChange{Key: k, Delivered: true, Cursor: in.Delivered, AtUnixMs: in.UpdatedAtUnixMs})
		}
		return nil
	})
	if err != nil {
		return nil, pgstore.Classified(err)
	}
	return out, nil
}

// upsertArgs are upsertSQL's parameter arrays for sorted states.
func upsertArgs(sorted []receipt.State) []any {
	n := len(sorted)
	var (
		users, channels, readMsgs, delivMsgs, devices       = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		readEpochs, readSeqs, delivEpochs, delivSeqs, times = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		privEpochs, privSeqs                                = make([]int64, n), make([]int64, n)
	)
	now := time.Now().UnixMilli()
	for i, st := range sorted {
		users[i], channels[i] = st.Key.User, st.Key.Channel
		readEpochs[i], readSeqs[i], readMsgs[i] = st.Read.Position.Epoch, st.Read.Position.Seq, st.Read.MessageID
		delivEpochs[i], delivSeqs[i], delivMsgs[i] = st.Delivered.Position.Epoch, st.Delivered.Position.Seq, st.Delivered.MessageID
		privEpochs[i], privSeqs[i] = st.PrivateRead.Position.Epoch, st.PrivateRead.Position.Seq
		devices[i] = st.DeviceID
		times[i] = st.UpdatedAtUnixMs
		if times[i] <= 0 {
			times[i] = now
		}
	}
	return []any{users, channels, readEpochs, readSeqs, readMsgs, delivEpochs, delivSeqs, delivMsgs, devices, times, privEpochs, privSeqs}
}
