package pgstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tracing"
)

// Defaults.
const (
	URLDefault      = "postgres://postgres@127.0.0.1:5432/receipts?sslmode=disable"
	MaxConnsDefault = 8
)

// Config configures a Store.
type Config struct {
	// URL is the Postgres connection string. Defaults to URLDefault.
	URL string
	// Schema, when set, is the only entry of search_path, so every table
	// lives in it (tests use a schema each). Defaults to the server's path.
	Schema string
	// MaxConns bounds the pool. Defaults to MaxConnsDefault.
	MaxConns int32
	// TracerProvider, when set, traces every statement as a span (SQL
	// text, never its arguments) under the caller's span; a call outside
	// any span starts none. Nil: no tracing, no cost.
	TracerProvider trace.TracerProvider
}

// RegisterFlags registers --pg-url and --pg-max-conns with the config's
// values as defaults (URL falls back to URLDefault).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	if c.URL == "" {
		c.URL = URLDefault
	}
	fs.StringVar(&c.URL, "pg-url", c.URL, "Postgres connection URL (TLS with sslmode=require/verify-full and sslrootcert=…)")
	fs.Var(int32Value{&c.MaxConns}, "pg-max-conns", "Postgres pool size (0: the binary's default)")
}

// int32Value is a flag.Value for an int32.
type int32Value struct{ p *int32 }

func (v int32Value) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v int32Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return err
	}
	*v.p = int32(n)
	return nil
}

// Store is a Postgres connection pool with the receipts queries.
type Store struct {
	pool *pgxpool.Pool
}

// Open connects lazily: it does not fail when Postgres is down, so a service
// can start and report not-ready until the database answers.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		cfg.URL = URLDefault
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing postgres url: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	} else if !strings.Contains(cfg.URL, "pool_max_conns") {
		pc.MaxConns = MaxConnsDefault
	}
	if cfg.Schema != "" {
		pc.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = "receipts"
	}
	pc.ConnConfig.ConnectTimeout = 5 * time.Second
	if cfg.TracerProvider != nil {
		pc.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(tracing.ChildOnly(cfg.TracerProvider)),
			otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()), otelpgx.WithDisableAcquireTracer())
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("creating postgres pool: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Pool exposes the pool for tests and tools.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error { return classify(s.pool.Ping(ctx)) }

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
func (s *Store) UpsertBulk(ctx context.Context, states []receipt.State) (int64, error) {
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
func (s *Store) UpsertBulkGuessed(ctx context.Context, states []receipt.State, hasRow func(receipt.Key) bool) (n int64, missed bool, err error) {
	return s.upsertBulk(ctx, states, hasRow)
}

func (s *Store) upsertBulk(ctx context.Context, states []receipt.State, hasRow func(receipt.Key) bool) (int64, bool, error) {
	if len(states) == 0 {
		return 0, false, nil
	}
	sorted := states
	if !slices.IsSortedFunc(states, receipt.CompareStates) {
		sorted = slices.Clone(states)
		slices.SortFunc(sorted, receipt.CompareStates)
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		n, err = upsertBulkTx(ctx, tx, sorted, hasRow)
		return err
	})
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
		n, err := s.Upsert(ctx, sorted)
		return n, true, err
	}
	return n, false, classify(err)
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
func (s *Store) Upsert(ctx context.Context, states []receipt.State) (int64, error) {
	if len(states) == 0 {
		return 0, nil
	}
	n, err := upsert(ctx, s.pool, states)
	return n, classify(err)
}

// UpsertTx is Upsert inside a caller's transaction.
func UpsertTx(ctx context.Context, tx pgx.Tx, states []receipt.State) (int64, error) {
	n, err := upsert(ctx, tx, states)
	return n, classify(err)
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

// MaxChannelsPerRead bounds how many rows one user read returns.
const MaxChannelsPerRead = 10000

// Get returns a user's states, for all channels or the listed ones, in
// channel order.
func (s *Store) Get(ctx context.Context, user string, channels []string) ([]receipt.State, error) {
	var rows pgx.Rows
	var err error
	if len(channels) == 0 {
		rows, err = s.pool.Query(ctx, `SELECT `+selectColumns+` FROM read_receipts WHERE user_id = $1 ORDER BY channel_id LIMIT $2`, user, MaxChannelsPerRead)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT `+selectColumns+` FROM read_receipts WHERE user_id = $1 AND channel_id = ANY($2) ORDER BY channel_id`, user, channels)
	}
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// UserStatesAfter returns up to limit of a user's states with a channel
// after the given one ("" starts at the first), in channel order: a whole
// user read in bounded pages, however many channels it has.
func (s *Store) UserStatesAfter(ctx context.Context, user, after string, limit int) ([]receipt.State, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+selectColumns+` FROM read_receipts
		WHERE user_id = $1 AND channel_id > $2 ORDER BY channel_id LIMIT $3`, user, after, limit)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	return out, classify(err)
}

// UsersStates returns every state of the users, in (user, channel)
// order, up to limit rows in all; more reports that the limit cut it
// short (the caller pages those users with UserStatesAfter).
func (s *Store) UsersStates(ctx context.Context, users []string, limit int) (states []receipt.State, more bool, err error) {
	rows, err := s.pool.Query(ctx, `SELECT `+selectColumns+` FROM read_receipts
		WHERE user_id = ANY($1) ORDER BY user_id, channel_id LIMIT $2`, users, limit+1)
	if err != nil {
		return nil, false, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	if err != nil {
		return nil, false, classify(err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// GetKeys returns the stored states of keys (any users, in no order; a
// key without a row is left out) in one statement: the drift sweep's
// lookup of a whole page of Redis keys, instead of a query per user.
func (s *Store) GetKeys(ctx context.Context, keys []receipt.Key) ([]receipt.State, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	users, channels := keyArrays(len(keys), func(i int) receipt.Key { return keys[i] })
	rows, err := s.pool.Query(ctx, `SELECT `+selectColumns+` FROM read_receipts t `+joinKeysSQL, users, channels)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	return out, classify(err)
}

// Page returns up to limit states with keys strictly after the given key, in
// key order: the drift sweep's bounded walk. An empty after starts at the
// beginning.
func (s *Store) Page(ctx context.Context, after receipt.Key, limit int) ([]receipt.State, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+selectColumns+` FROM read_receipts
		WHERE (user_id, channel_id) > ($1, $2) ORDER BY user_id, channel_id LIMIT $3`, after.User, after.Channel, limit)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) { return scanState(r) })
	return out, classify(err)
}

// Count returns the number of rows in read_receipts.
func (s *Store) Count(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM read_receipts`).Scan(&n)
	return n, classify(err)
}
