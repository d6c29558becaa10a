package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// ThreadCursorChange is a public thread cursor that Postgres holds at
// exactly the position a write brought: the change feed's unit for
// threads.
type ThreadCursorChange struct {
	Key thread.Key
	// Delivered is true for the delivered cursor, false for the public read.
	Delivered bool
	Cursor    receipt.Cursor
	AtUnixMs  int64
}

// upsertThreadChangesSQL is UpsertThreadStates' statement answering, as
// upsertChangesSQL does for channels, every key's public cursors once it
// ran and whether the user shares each kind.
const upsertThreadChangesSQL = `
WITH up AS (` + upsertThreadStatesSQL + `
RETURNING t.user_id, t.channel_id, t.root_seq, t.read_epoch, t.read_seq, t.delivered_epoch, t.delivered_seq)
SELECT k.u, k.c, k.r,
       COALESCE(up.read_epoch, o.read_epoch, -1), COALESCE(up.read_seq, o.read_seq, -1),
       COALESCE(up.delivered_epoch, o.delivered_epoch, -1), COALESCE(up.delivered_seq, o.delivered_seq, -1),
       COALESCE(s.share_read, true), COALESCE(s.share_delivered, true)
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(u, c, r)
LEFT JOIN up ON up.user_id = k.u AND up.channel_id = k.c AND up.root_seq = k.r
LEFT JOIN thread_states o ON o.user_id = k.u AND o.channel_id = k.c AND o.root_seq = k.r
LEFT JOIN user_settings s ON s.user_id = k.u`

// UpsertThreadChanges is UpsertThreadStates, also returning the change
// feed's entries: each public thread cursor (read, delivered; never the
// private read) that Postgres holds at exactly the incoming position once
// the statement ran, for users who share that kind. As UpsertChanges: a
// stale move never appears, a replay appears again (at least once).
func (s *Store) UpsertThreadChanges(ctx context.Context, states []thread.State, mentionCap int) ([]ThreadCursorChange, error) {
	if len(states) == 0 {
		return nil, nil
	}
	if mentionCap <= 0 {
		mentionCap = channel.MentionCapDefault
	}
	sorted := sortedThreadStates(states)
	// Compared as written: merged into the empty register (delivered
	// raised to the read seq).
	byKey := make(map[thread.Key]receipt.State, len(sorted))
	for _, st := range sorted {
		in, _ := thread.Merge(thread.State{}, st, mentionCap)
		byKey[st.Key] = in.Cursors
	}
	rows, err := s.pool.Query(ctx, upsertThreadChangesSQL, upsertThreadArgs(sorted, mentionCap)...)
	if err != nil {
		return nil, classify(err)
	}
	var (
		out                      []ThreadCursorChange
		k                        thread.Key
		read, delivered          receipt.Position
		shareRead, shareDelivers bool
	)
	_, err = pgx.ForEachRow(rows, []any{&k.User, &k.Channel, &k.Root, &read.Epoch, &read.Seq, &delivered.Epoch, &delivered.Seq, &shareRead, &shareDelivers}, func() error {
		in := byKey[k]
		if shareRead && !in.Read.Position.IsZero() && in.Read.Position == read {
			out = append(out, ThreadCursorChange{Key: k, Cursor: in.Read, AtUnixMs: in.UpdatedAtUnixMs})
		}
		if shareDelivers && !in.Delivered.Position.IsZero() && in.Delivered.Position == delivered {
			out = append(out, ThreadCursorChange{Key: k, Delivered: true, Cursor: in.Delivered, AtUnixMs: in.UpdatedAtUnixMs})
		}
		return nil
	})
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}
