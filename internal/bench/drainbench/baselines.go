package drainbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/internal/bench/benchpg"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
)

// PlainTable is the baseline's plain table: read_receipts' columns, no
// partitions, no index but the primary key.
const PlainTable = "bench_plain_receipts"

// Baselines are one round's same-run bounds.
type Baselines struct {
	Round int          `json:"round"`
	Copy  []CopyResult `json:"copy"`
	Naive *NaiveResult `json:"naive,omitempty"`
}

// CopyResult is a raw COPY of the final rows (pgstore's COPY columns and
// rows), in random order, into a freshly truncated table, right after a checkpoint; with Conns > 1 the
// rows are split evenly and copied concurrently, one COPY (one
// transaction) per connection.
type CopyResult struct {
	Table      string  `json:"table"`
	Conns      int     `json:"conns"`
	Rows       int     `json:"rows"`
	Seconds    float64 `json:"seconds"`
	RowsPerSec float64 `json:"rows_per_sec"`
	WALBytes   int64   `json:"wal_bytes"`
}

// NaiveResult is the naive writer: pgstore's Upsert (its one-statement
// max-merge) of one event at a time, each its own transaction
// (autocommit), over a prefix of the events, from Conns writers on a pool
// of Conns connections (events routed by key, so each key's events stay
// in order on one writer).
type NaiveResult struct {
	Events       int          `json:"events"`
	Conns        int          `json:"conns"`
	Seconds      float64      `json:"seconds"`
	EventsPerSec float64      `json:"events_per_sec"`
	Verify       VerifyResult `json:"verify"`
}

// baselines measures one round's bounds in a database migrated by bin.
func (h *harness) baselines(ctx context.Context, round int, bin, dir string) (*Baselines, error) {
	res := &Baselines{Round: round}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := h.pg.Recreate(ctx); err != nil {
		return nil, err
	}
	if err := runChild(ctx, "persister migrate", filepath.Join(dir, "baselines-migrate.log"), 2*time.Minute,
		bin, "migrate", "--pg-url", h.pg.URL()); err != nil {
		return nil, err
	}
	conn, err := h.pg.Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if h.cfg.Copy {
		if _, err := conn.Exec(ctx, `CREATE TABLE `+PlainTable+` (LIKE read_receipts INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
			PRIMARY KEY (user_id, channel_id))`); err != nil {
			return nil, fmt.Errorf("creating %s: %w", PlainTable, err)
		}
		rows := h.shuffledFinals()
		for _, table := range []string{"read_receipts", PlainTable} {
			for _, conns := range []int{1, 2} {
				r, err := h.copyBaseline(ctx, conn, table, conns, rows)
				if err != nil {
					return nil, err
				}
				h.logf("  baseline COPY into %s, %s: %.0f rows/s", table, plural(conns, "conn"), r.RowsPerSec)
				res.Copy = append(res.Copy, r)
			}
		}
	}
	if h.cfg.NaiveEvents > 0 {
		r, err := h.naiveBaseline(ctx, conn)
		if err != nil {
			return nil, err
		}
		h.logf("  baseline naive upserts, %d conns: %.0f events/s (%s)", r.Conns, r.EventsPerSec, r.Verify)
		res.Naive = r
	}
	return res, nil
}

// shuffledFinals is every final row in a random order fixed by the seed.
func (h *harness) shuffledFinals() []receipt.State {
	rows := make([]receipt.State, len(h.finals))
	for i, f := range h.finals {
		rows[i] = f.State
	}
	r := newStream(h.cfg.Data.Seed ^ 0x636f7079)
	for i := len(rows) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		rows[i], rows[j] = rows[j], rows[i]
	}
	return rows
}

// prepare empties table and checkpoints, so each timed write starts from
// the same state.
func prepare(ctx context.Context, c *pgx.Conn, table string) error {
	if _, err := c.Exec(ctx, `TRUNCATE `+pgx.Identifier{table}.Sanitize()); err != nil {
		return fmt.Errorf("truncating %s: %w", table, err)
	}
	if _, err := c.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func (h *harness) copyBaseline(ctx context.Context, conn *pgx.Conn, table string, conns int, rows []receipt.State) (CopyResult, error) {
	res := CopyResult{Table: table, Conns: conns, Rows: len(rows)}
	if err := prepare(ctx, conn, table); err != nil {
		return res, err
	}
	cs := make([]*pgx.Conn, conns)
	for i := range cs {
		c, err := h.pg.Connect(ctx)
		if err != nil {
			return res, err
		}
		defer c.Close(context.WithoutCancel(ctx))
		cs[i] = c
	}
	lsn0, err := benchpg.WALLSN(ctx, conn)
	if err != nil {
		return res, err
	}
	start := time.Now()
	now := start
	err = concurrently(ctx, len(cs), func(ctx context.Context, i int) error {
		c, part := cs[i], rows[i*len(rows)/conns:(i+1)*len(rows)/conns]
		n, err := c.CopyFrom(ctx, pgx.Identifier{table}, cursors.CopyColumns,
			pgx.CopyFromSlice(len(part), func(j int) ([]any, error) { return cursors.CopyRow(part[j], now), nil }))
		if err != nil {
			return fmt.Errorf("COPY into %s: %w", table, err)
		}
		if n != int64(len(part)) {
			return fmt.Errorf("COPY into %s wrote %d rows, want %d", table, n, len(part))
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.RowsPerSec = float64(len(rows)) / res.Seconds
	if lsn1, err := benchpg.WALLSN(ctx, conn); err == nil {
		res.WALBytes = int64(lsn1 - lsn0)
	}
	return res, nil
}

func (h *harness) naiveBaseline(ctx context.Context, conn *pgx.Conn) (*NaiveResult, error) {
	n := min(h.cfg.NaiveEvents, len(h.ds.Events))
	res := &NaiveResult{Events: n, Conns: h.cfg.NaiveConns}
	if err := prepare(ctx, conn, "read_receipts"); err != nil {
		return nil, err
	}
	// Each key's events go to one writer, in stream order.
	work := make([][]int, h.cfg.NaiveConns)
	for i := range n {
		w := shardOf(h.ds.KeyID(h.ds.Events[i]), h.cfg.NaiveConns)
		work[w] = append(work[w], i)
	}
	store, err := h.pg.OpenStore(ctx, h.cfg.NaiveConns)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	start := time.Now()
	err = concurrently(ctx, len(work), func(ctx context.Context, w int) error {
		for _, i := range work[w] {
			if _, err := cursors.NewPostgres(store).Upsert(ctx, []receipt.State{h.ds.State(i)}); err != nil {
				return fmt.Errorf("naive upsert: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.EventsPerSec = float64(n) / res.Seconds
	rows, err := benchpg.ReadAll(ctx, conn, "read_receipts")
	if err != nil {
		return nil, err
	}
	res.Verify = Verify(h.ds.Finals(n), rows)
	return res, nil
}

// shardOf spreads key ids over n workers (a multiplicative hash, so that
// neighbouring ids do not share a worker).
func shardOf(id uint64, n int) int { return int((id * 0x9e3779b97f4a7c15 >> 32) % uint64(n)) }

// concurrently runs f(ctx, 0..n-1) in n goroutines and returns their
// errors joined; the first error cancels the others' ctx.
func concurrently(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if errs[i] = f(ctx, i); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
