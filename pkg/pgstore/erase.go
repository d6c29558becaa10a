package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Erasure is the statements of an erasure, each brought by the kind (or
// view) that owns the table ($1: the user id): Channels answer the
// channels the user's rows name (channel_id), read before any delete;
// Deletes delete the user's rows; ChannelDeletes ($2: those channels)
// delete them from a table whose index leads with channel_id (an index
// scan, not a walk of the table); Redacts ($2 too) redact the user in
// rows not theirs. A new per-user table is
// covered by one or the other (TestErasedTablesCoverEveryUserTable, in
// pkg/kinds, fails until it is).
type Erasure struct {
	Channels, Deletes, ChannelDeletes, Redacts []string
}

// And is e with the statements of o after its own.
func (e Erasure) And(o Erasure) Erasure {
	return Erasure{
		Channels:       append(slices.Clone(e.Channels), o.Channels...),
		Deletes:        append(slices.Clone(e.Deletes), o.Deletes...),
		Redacts:        append(slices.Clone(e.Redacts), o.Redacts...),
		ChannelDeletes: append(slices.Clone(e.ChannelDeletes), o.ChannelDeletes...),
	}
}

// RedactedColumns are the columns that name a user in rows that are not
// the user's: an erasure redacts them (deleteUserRows), and
// TestErasureCoversEveryColumnNamingAUser fails until a new one is
// listed.
// A kind whose rows name a user brings its own redaction and its columns
// (kind.PGRedact, kinds.RedactedColumns).
var RedactedColumns = []string{"parked_dead_letters.record_key", "parked_dead_letters.record_value"}

// MaxTombstoneLookup bounds the users of one Tombstones call (a
// persister window holds at most this many distinct users).
const MaxTombstoneLookup = 100_000

// Erase applies an erasure: in one transaction it raises the user's
// tombstone (a max-register over generation, ties by time) and, only when
// that raised its generation, runs e: it finds the user's channels,
// deletes the user's rows and redacts the user (kind.PGErasure). Applying an erasure again, or an older one, changes
// nothing, so a replay of the topic from offset 0 never deletes what the
// user wrote after it; nor does the same generation with a later time (a
// persister that applied the erasure ahead of its record, from an event
// stamped with its generation, then meets the record: only the time
// moves). deleted counts the rows removed; advanced says whether the
// tombstone moved.
func (s *Store) Erase(ctx context.Context, t tombstone.Tombstone, e Erasure) (deleted int64, advanced bool, err error) {
	if err := t.Validate(); err != nil {
		return 0, false, fmt.Errorf("erasing: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		deleted, advanced = 0, false
		// The row lock taken here orders concurrent erasures of one user.
		var before int64
		var moved bool
		err := tx.QueryRow(ctx, `WITH old AS (SELECT generation FROM user_tombstones WHERE user_id = $1 FOR UPDATE),
up AS (INSERT INTO user_tombstones AS t (user_id, generation, erased_at_unix_ms)
VALUES ($1, $2, $3)
ON CONFLICT (user_id) DO UPDATE SET generation = excluded.generation, erased_at_unix_ms = excluded.erased_at_unix_ms
WHERE (excluded.generation, excluded.erased_at_unix_ms) > (t.generation, t.erased_at_unix_ms)
RETURNING 1)
SELECT coalesce((SELECT generation FROM old), 0), EXISTS (SELECT 1 FROM up)`,
			t.User, t.Generation, t.ErasedAtUnixMs).Scan(&before, &moved)
		if err != nil {
			return err
		}
		if !moved {
			return nil
		}
		advanced = true
		if t.Generation <= before {
			return nil // the same erasure, a later time: nothing to delete again
		}
		// Raised before the deletes and held to commit: a writer checking
		// the clock after its rows committed either comes first (these
		// deletes then see its rows) or waits for this commit.
		if _, err := tx.Exec(ctx, `UPDATE erasure_clock SET erasures = erasures + 1`); err != nil {
			return fmt.Errorf("raising the erasure clock: %w", err)
		}
		deleted, err = deleteUserRows(ctx, tx, t.User, e)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("erasing user %s: %w", t.User, classify(err))
	}
	return deleted, advanced, nil
}

// deleteUserRows runs e for user: its channels first, then its deletes,
// then its redactions.
func deleteUserRows(ctx context.Context, tx pgx.Tx, user string, e Erasure) (int64, error) {
	var channels []string
	for _, stmt := range e.Channels {
		rows, err := tx.Query(ctx, stmt, user)
		if err != nil {
			return 0, fmt.Errorf("finding the user's channels (%s): %w", stmt, err)
		}
		chs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return 0, fmt.Errorf("finding the user's channels (%s): %w", stmt, err)
		}
		channels = append(channels, chs...)
	}
	slices.Sort(channels)
	channels = slices.Compact(channels)
	var deleted int64
	for _, stmt := range e.Deletes {
		tag, err := tx.Exec(ctx, stmt, user)
		if err != nil {
			return 0, fmt.Errorf("deleting a kind's rows (%s): %w", stmt, err)
		}
		deleted += tag.RowsAffected()
	}
	for _, stmt := range e.ChannelDeletes {
		tag, err := tx.Exec(ctx, stmt, user, channels)
		if err != nil {
			return 0, fmt.Errorf("deleting rows found through the user's channels (%s): %w", stmt, err)
		}
		deleted += tag.RowsAffected()
	}
	// What names the user in rows that are not the user's: the kinds'
	// (the sender of their group mentions, kept with no sender), and the
	// dead letters parked under the user's record keys (their values
	// redacted: the row stays, as a count of what failed, with no
	// content).
	for _, stmt := range e.Redacts {
		if _, err := tx.Exec(ctx, stmt, user, channels); err != nil {
			return 0, fmt.Errorf("redacting a kind's rows (%s): %w", stmt, err)
		}
	}
	esc := receipt.EscapeKeyID(user)
	if _, err := tx.Exec(ctx, `UPDATE parked_dead_letters SET record_key = NULL, record_value = NULL, reason = 'erased'
		WHERE record_key = $1::bytea OR substring(record_key FROM 1 FOR $3) = $2::bytea`,
		[]byte("u::"+esc), []byte(esc+":"), len(esc)+1); err != nil {
		return 0, fmt.Errorf("redacting parked dead letters: %w", err)
	}
	return deleted, nil
}

// EraseAgain deletes the rows of a user whose erasure is already applied
// (its tombstone stored): what a writer that raced the erasure wrote after
// its deletes; e as for Erase. It does not
// touch the tombstone nor the erasure clock.
func (s *Store) EraseAgain(ctx context.Context, user string, e Erasure) (deleted int64, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		deleted, err = deleteUserRows(ctx, tx, user, e)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("erasing user %s again: %w", user, classify(err))
	}
	return deleted, nil
}

// ErasureClock returns the count of erasures applied. Read it before a
// tombstone lookup and pass it to ErasureClockSettled after the writes
// that lookup filtered.
func (s *Store) ErasureClock(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT erasures FROM erasure_clock`).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading the erasure clock: %w", classify(err))
	}
	return n, nil
}

// ErasureClockSettled returns the count of erasures applied, first
// waiting for an erasure in progress to commit or roll back (a share lock
// on the clock's row, released as the statement ends). Called after a
// writer's rows are committed: a count equal to the one read before its
// tombstone lookup means no erasure can have missed them (one that
// starts later deletes them); a greater one means the lookup may be stale.
func (s *Store) ErasureClockSettled(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT erasures FROM erasure_clock FOR SHARE`).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading the erasure clock: %w", classify(err))
	}
	return n, nil
}

// Tombstones returns the tombstones of those of users that were erased,
// in one query.
func (s *Store) Tombstones(ctx context.Context, users []string) (tombstone.Set, error) {
	out := tombstone.Set{}
	if len(users) == 0 {
		return out, nil
	}
	if len(users) > MaxTombstoneLookup {
		return nil, fmt.Errorf("looking up the tombstones of %d users: the limit is %d", len(users), MaxTombstoneLookup)
	}
	rows, err := s.pool.Query(ctx, `SELECT user_id, generation, erased_at_unix_ms FROM user_tombstones WHERE user_id = ANY($1)`, users)
	if err != nil {
		return nil, fmt.Errorf("looking up tombstones: %w", classify(err))
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tombstone.Tombstone, error) {
		var t tombstone.Tombstone
		err := r.Scan(&t.User, &t.Generation, &t.ErasedAtUnixMs)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("looking up tombstones: %w", classify(err))
	}
	for _, t := range ts {
		out.Add(t)
	}
	return out, nil
}

// Tombstone returns one user's tombstone (the zero value when never
// erased).
func (s *Store) Tombstone(ctx context.Context, user string) (tombstone.Tombstone, error) {
	t := tombstone.Tombstone{User: user}
	err := s.pool.QueryRow(ctx, `SELECT generation, erased_at_unix_ms FROM user_tombstones WHERE user_id = $1`, user).
		Scan(&t.Generation, &t.ErasedAtUnixMs)
	if errors.Is(err, pgx.ErrNoRows) {
		return tombstone.Tombstone{User: user}, nil
	}
	if err != nil {
		return tombstone.Tombstone{}, fmt.Errorf("looking up the tombstone of %s: %w", user, classify(err))
	}
	return t, nil
}
