package pgstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// AdvisoryLock is a Postgres session-level advisory lock, held on a
// connection of its own (outside the pool, so the pool's connections come
// and go freely): it lasts as long as that session. When the session ends
// (the connection is lost, the backend terminated, Postgres restarted) the
// server releases the lock and another session may take it; Check tells the
// holder.
type AdvisoryLock struct {
	mu   sync.Mutex // a pgx.Conn serves one query at a time
	conn *pgx.Conn
	name string
}

// TryAdvisoryLock opens a dedicated connection and tries, without waiting,
// the advisory lock named name in the store's schema (the key hashes the
// name with current_schema(), so deployments on separate schemas of one
// database do not share it). ok is false when another session holds it.
func (s *Store) TryAdvisoryLock(ctx context.Context, name string) (lock *AdvisoryLock, ok bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, false, classify(fmt.Errorf("connecting for advisory lock %s: %w", name, err))
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1 || ':' || current_schema(), 0))`, name).Scan(&ok); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, false, classify(fmt.Errorf("trying advisory lock %s: %w", name, err))
	}
	if !ok {
		_ = conn.Close(ctx)
		return nil, false, nil
	}
	return &AdvisoryLock{conn: conn, name: name}, true, nil
}

// Check returns nil while the lock's session is alive (it answers a
// query); an error means the lock is lost, or cannot be known to be held.
func (l *AdvisoryLock) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.conn.Ping(ctx); err != nil {
		return classify(fmt.Errorf("advisory lock %s: session lost: %w", l.name, err))
	}
	return nil
}

// PID is the backend process id of the lock's session (pg_stat_activity,
// pg_locks, pg_terminate_backend).
func (l *AdvisoryLock) PID() uint32 { return l.conn.PgConn().PID() }

// Release unlocks and closes the session (closing alone would release it
// too).
func (l *AdvisoryLock) Release(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.conn.IsClosed() {
		_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1 || ':' || current_schema(), 0))`, l.name)
	}
	_ = l.conn.Close(ctx)
}
