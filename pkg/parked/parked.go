package parked

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/pgstore"
)

// Store is the parked dead letters' table on a Postgres store. It is one
// pointer: make one where it is needed.
type Store struct{ pg *pgstore.Store }

// New is the parked dead letters of pg.
func New(pg *pgstore.Store) Store { return Store{pg: pg} }

// ErrNotFound means no parked dead letter has the requested id.
var ErrNotFound = errors.New("parked dead letter not found")

// Record is a dead letter the reconciler could not repair, kept in
// parked_dead_letters for an operator to list and replay.
type Record struct {
	// ID is assigned by Park.
	ID int64
	// ParkedAt is assigned by Park.
	ParkedAt time.Time
	// Reason says why the record could not be repaired.
	Reason string
	// SourceTopic, SourcePartition and SourceOffset locate the original
	// record (from the dead-letter headers); -1 when unknown.
	SourceTopic     string
	SourcePartition int32
	SourceOffset    int64
	// Attempts counts the reconciler's tries before it gave up.
	Attempts int
	// Key and Value are the record's bytes, verbatim.
	Key, Value []byte
	// ReplayedAt is set once an operator replayed the record; nil while
	// pending.
	ReplayedAt *time.Time
}

// Park stores a dead letter and returns its id. Parking is idempotent for
// a pending record with known source coordinates: when the same record
// (same source topic, partition, offset, key and value) is already parked
// and not yet replayed, its id is returned and nothing is inserted, so a
// dead letter consumed twice (a lost offset commit) is parked once.
func (s Store) Park(ctx context.Context, r Record) (int64, error) {
	var id int64
	err := pgx.BeginFunc(ctx, s.pg.Pool(), func(tx pgx.Tx) error {
		if r.SourceOffset >= 0 {
			err := tx.QueryRow(ctx, `SELECT id FROM parked_dead_letters
				WHERE replayed_at IS NULL AND source_topic = $1 AND source_partition = $2 AND source_offset = $3
				  AND record_key IS NOT DISTINCT FROM $4 AND record_value IS NOT DISTINCT FROM $5
				ORDER BY id LIMIT 1`,
				r.SourceTopic, r.SourcePartition, r.SourceOffset, r.Key, r.Value).Scan(&id)
			if err == nil {
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		return tx.QueryRow(ctx, `INSERT INTO parked_dead_letters
			(reason, source_topic, source_partition, source_offset, attempts, record_key, record_value)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			r.Reason, r.SourceTopic, r.SourcePartition, r.SourceOffset, r.Attempts, r.Key, r.Value).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("parking dead letter %s/%d@%d: %w", r.SourceTopic, r.SourcePartition, r.SourceOffset, pgstore.Classified(err))
	}
	return id, nil
}

// Query selects parked records for List.
type Query struct {
	// AfterID lists records with a greater id (for paging). Zero starts at
	// the beginning.
	AfterID int64
	// Limit bounds the page. Defaults to 100.
	Limit int
	// IncludeReplayed also lists records already replayed. By default only
	// pending ones are listed.
	IncludeReplayed bool
}

const parkedColumns = `id, parked_at, reason, source_topic, source_partition, source_offset,
    attempts, record_key, record_value, replayed_at`

func scanParked(row pgx.Row) (Record, error) {
	var r Record
	err := row.Scan(&r.ID, &r.ParkedAt, &r.Reason, &r.SourceTopic, &r.SourcePartition, &r.SourceOffset,
		&r.Attempts, &r.Key, &r.Value, &r.ReplayedAt)
	return r, err
}

// List returns parked records in id order.
func (s Store) List(ctx context.Context, q Query) ([]Record, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	rows, err := s.pg.Pool().Query(ctx, `SELECT `+parkedColumns+` FROM parked_dead_letters
		WHERE id > $1 AND ($2 OR replayed_at IS NULL) ORDER BY id LIMIT $3`, q.AfterID, q.IncludeReplayed, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("listing parked dead letters: %w", pgstore.Classified(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Record, error) { return scanParked(r) })
	if err != nil {
		return nil, fmt.Errorf("listing parked dead letters: %w", pgstore.Classified(err))
	}
	return out, nil
}

// Get returns one parked record, or ErrNotFound.
func (s Store) Get(ctx context.Context, id int64) (Record, error) {
	r, err := scanParked(s.pg.Pool().QueryRow(ctx, `SELECT `+parkedColumns+` FROM parked_dead_letters WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("reading parked dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("reading parked dead letter %d: %w", id, pgstore.Classified(err))
	}
	return r, nil
}

// MarkReplayed sets replayed_at on a pending record. It reports false when
// the record was already replayed (or does not exist), so two operators
// replaying at once see who did it.
func (s Store) MarkReplayed(ctx context.Context, id int64) (bool, error) {
	tag, err := s.pg.Pool().Exec(ctx, `UPDATE parked_dead_letters SET replayed_at = now() WHERE id = $1 AND replayed_at IS NULL`, id)
	if err != nil {
		return false, fmt.Errorf("marking parked dead letter %d replayed: %w", id, pgstore.Classified(err))
	}
	return tag.RowsAffected() == 1, nil
}

// Count returns how many parked records are still pending.
func (s Store) Count(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pg.Pool().QueryRow(ctx, `SELECT count(*) FROM parked_dead_letters WHERE replayed_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting parked dead letters: %w", pgstore.Classified(err))
	}
	return n, nil
}
