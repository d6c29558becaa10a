package threads

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// CursorChange is a public thread cursor that Postgres holds at exactly
// the position a write brought: the change feed's unit for threads.
type CursorChange struct {
	Key thread.Key
	// Delivered is true for the delivered cursor, false for the public read.
	Delivered bool
	Cursor    receipt.Cursor
	AtUnixMs  int64
}

// WriteChangesPG is WriteStatesPG, also returning the change feed's
// entries (changes.sql): each public thread cursor (read, delivered;
// never the private read) that Postgres holds at exactly the incoming
// position once the statement ran, for users who share that kind. As the
// channels' feed (pgstore.Store.UpsertChanges): a stale move never
// appears, a replay appears again (at least once).
func (s Store) WriteChangesPG(ctx context.Context, states []thread.State) ([]CursorChange, error) {
	if len(states) == 0 {
		return nil, nil
	}
	sorted := sortedStates(states)
	// Compared as written: merged into the empty register (delivered
	// raised to the read seq).
	byKey := make(map[thread.Key]receipt.State, len(sorted))
	for _, st := range sorted {
		in, _ := thread.Merge(thread.State{}, st, s.mentionCap)
		byKey[st.Key] = in.Cursors
	}
	rows, err := s.pg.Pool().Query(ctx, changesSQL, s.upsertArgs(sorted)...)
	if err != nil {
		return nil, pgstore.Classified(fmt.Errorf("upserting %d thread registers: %w", len(states), err))
	}
	var (
		out                      []CursorChange
		k                        thread.Key
		read, delivered          receipt.Position
		shareRead, shareDelivers bool
	)
	_, err = pgx.ForEachRow(rows, []any{&k.User, &k.Channel, &k.Root, &read.Epoch, &read.Seq, &delivered.Epoch, &delivered.Seq, &shareRead, &shareDelivers}, func() error {
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
		return nil, pgstore.Classified(fmt.Errorf("upserting %d thread registers: %w", len(states), err))
	}
	return out, nil
}
