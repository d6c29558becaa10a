package benchpg

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// AppName is the harness' application_name in pg_stat_activity.
const AppName = "receiptsbench"

// Server is the Postgres server and the database the bench owns.
type Server struct {
	adminURL string // any database of the server, for CREATE/DROP DATABASE
	db       string
	benchURL string
}

// DB is the bench database's name.
func (s *Server) DB() string { return s.db }

// NewServer derives the bench database's URL from a server URL (its
// database is only used for the admin connection). The database name must
// contain "bench": it is dropped with everything in it.
func NewServer(serverURL, db string) (*Server, error) {
	if !strings.Contains(db, "bench") {
		return nil, fmt.Errorf("refusing to use database %q: the bench drops it, so its name must contain \"bench\"", db)
	}
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("--pg-url must be a postgres:// URL, got %q", serverURL)
	}
	b := *u
	b.Path = "/" + db
	return &Server{adminURL: serverURL, db: db, benchURL: b.String()}, nil
}

// Connect opens one connection to the bench database, named AppName.
func (s *Server) Connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(s.benchURL)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = AppName
	cfg.ConnectTimeout = 5 * time.Second
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", s.db, err)
	}
	return c, nil
}

// OpenStore opens a pgstore.Store on the bench database, named AppName,
// with a pool of conns connections, all connected before it returns (so
// that a timed write does not pay for the connections).
func (s *Server) OpenStore(ctx context.Context, conns int) (*pgstore.Store, error) {
	u, err := url.Parse(s.benchURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("application_name", AppName)
	u.RawQuery = q.Encode()
	store, err := pgstore.Open(ctx, pgstore.Config{URL: u.String(), MaxConns: int32(conns)})
	if err != nil {
		return nil, err
	}
	held := make([]*pgxpool.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range conns {
		c, err := store.Pool().Acquire(ctx)
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("connecting to %s: %w", s.db, err)
		}
		held = append(held, c)
	}
	return store, nil
}

// AdminConnect opens a connection to the server URL's own database.
func (s *Server) AdminConnect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(s.adminURL)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = AppName
	cfg.ConnectTimeout = 5 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

// Recreate drops the bench database (closing any session in it) and
// creates it empty.
func (s *Server) Recreate(ctx context.Context) error {
	c, err := s.AdminConnect(ctx)
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer c.Close(ctx)
	id := pgx.Identifier{s.db}.Sanitize()
	if _, err := c.Exec(ctx, `DROP DATABASE IF EXISTS `+id+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("dropping %s: %w", s.db, err)
	}
	if _, err := c.Exec(ctx, `CREATE DATABASE `+id); err != nil {
		return fmt.Errorf("creating %s: %w", s.db, err)
	}
	return nil
}

// ServerInfo is what the report says about Postgres.
type ServerInfo struct {
	Version  string            `json:"version"`
	Settings map[string]string `json:"settings"`
}

var reportedSettings = []string{"shared_buffers", "max_wal_size", "checkpoint_timeout", "synchronous_commit",
	"fsync", "full_page_writes", "wal_compression", "autovacuum", "stats_fetch_consistency", "shared_preload_libraries", "work_mem"}

func ReadServerInfo(ctx context.Context, c *pgx.Conn) (ServerInfo, error) {
	info := ServerInfo{Settings: map[string]string{}}
	if err := c.QueryRow(ctx, `SHOW server_version`).Scan(&info.Version); err != nil {
		return info, err
	}
	rows, err := c.Query(ctx, `SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings WHERE name = ANY($1)`, reportedSettings)
	if err != nil {
		return info, err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return info, err
		}
		info.Settings[k] = v
	}
	return info, rows.Err()
}

// ParseLSN parses a pg_lsn ("16/B374D848") into a byte position.
func ParseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("parsing LSN %q: no '/'", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("parsing LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("parsing LSN %q: %w", s, err)
	}
	return h<<32 | l, nil
}

func WALLSN(ctx context.Context, c *pgx.Conn) (uint64, error) {
	var s string
	if err := c.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		return 0, err
	}
	return ParseLSN(s)
}

// WALStats is pg_stat_wal (the whole server).
type WALStats struct {
	Records, FPI, Bytes int64
}

func ReadWALStats(ctx context.Context, c *pgx.Conn) (WALStats, error) {
	var w WALStats
	var bytes float64 // numeric
	err := c.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::float8 FROM pg_stat_wal`).Scan(&w.Records, &w.FPI, &bytes)
	w.Bytes = int64(bytes)
	return w, err
}

// TableStats are the cumulative row counters of a table and its
// partitions (pg_stat_user_tables).
type TableStats struct {
	Inserted   int64 `json:"n_tup_ins"`
	Updated    int64 `json:"n_tup_upd"`
	HOTUpdated int64 `json:"n_tup_hot_upd"`
	Deleted    int64 `json:"n_tup_del"`
	LiveTuples int64 `json:"n_live_tup"`
	DeadTuples int64 `json:"n_dead_tup"`
}

// ReadTableStats sums the counters of table and its partitions, on a fresh
// snapshot. Counters only include what backends have flushed: call it
// once the writers' sessions have ended (their exit flushes them).
func ReadTableStats(ctx context.Context, c *pgx.Conn, table string) (TableStats, error) {
	var s TableStats
	if _, err := c.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return s, err
	}
	err := c.QueryRow(ctx, `
SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0),
       coalesce(sum(n_tup_del), 0), coalesce(sum(n_live_tup), 0), coalesce(sum(n_dead_tup), 0)
FROM pg_stat_user_tables
WHERE relid = $1::regclass
   OR relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass)`, table).
		Scan(&s.Inserted, &s.Updated, &s.HOTUpdated, &s.Deleted, &s.LiveTuples, &s.DeadTuples)
	return s, err
}

// Sub is s − o.
func (s TableStats) Sub(o TableStats) TableStats {
	return TableStats{Inserted: s.Inserted - o.Inserted, Updated: s.Updated - o.Updated, HOTUpdated: s.HOTUpdated - o.HOTUpdated,
		Deleted: s.Deleted - o.Deleted, LiveTuples: s.LiveTuples, DeadTuples: s.DeadTuples}
}

// WaitSessionsGone waits until no session other than c's is connected to
// the bench database: a backend's statistics are flushed when it exits.
func WaitSessionsGone(ctx context.Context, c *pgx.Conn, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			return fmt.Errorf("waiting for the writers' sessions to end: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for the writers' sessions to end: %d still connected after %s", n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Backend is one row of pg_stat_activity.
type Backend struct {
	DB, BackendType, App string
}

// Activity is pg_stat_activity by pid.
func Activity(ctx context.Context, c *pgx.Conn) (map[int]Backend, error) {
	rows, err := c.Query(ctx, `SELECT pid, coalesce(datname, ''), coalesce(backend_type, ''), coalesce(application_name, '') FROM pg_stat_activity`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int]Backend{}
	for rows.Next() {
		var pid int
		var b Backend
		if err := rows.Scan(&pid, &b.DB, &b.BackendType, &b.App); err != nil {
			return nil, err
		}
		out[pid] = b
	}
	return out, rows.Err()
}

const selectRows = `SELECT user_id, channel_id, read_epoch, read_seq, read_message_id,
    delivered_epoch, delivered_seq, delivered_message_id, device_id,
    (extract(epoch from updated_at) * 1000)::bigint
FROM `

// ReadAll returns every row of table.
func ReadAll(ctx context.Context, c *pgx.Conn, table string) ([]receipt.State, error) {
	rows, err := c.Query(ctx, selectRows+pgx.Identifier{table}.Sanitize())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (receipt.State, error) {
		var s receipt.State
		err := r.Scan(&s.Key.User, &s.Key.Channel,
			&s.Read.Position.Epoch, &s.Read.Position.Seq, &s.Read.MessageID,
			&s.Delivered.Position.Epoch, &s.Delivered.Position.Seq, &s.Delivered.MessageID,
			&s.DeviceID, &s.UpdatedAtUnixMs)
		return s, err
	})
}

// URL is the bench database's URL.
func (s *Server) URL() string { return s.benchURL }
