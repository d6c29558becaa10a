package pgstore

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readstate/receipts/pkg/receipt"
)

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
// (user_settings; no row shares both).
const upsertChangesSQL = `
WITH up AS (` + upsertSQL + `
RETURNING t.user_id, t.channel_id, t.read_epoch, t.read_seq, t.delivered_epoch, t.delivered_seq)
SELECT k.u, k.c,
       COALESCE(up.read_epoch, o.read_epoch, -1), COALESCE(up.read_seq, o.read_seq, -1),
       COALESCE(up.delivered_epoch, o.delivered_epoch, -1), COALESCE(up.delivered_seq, o.delivered_seq, -1),
       COALESCE(s.share_read, true), COALESCE(s.share_delivered, true)
FROM unnest($1::text[], $2::text[]) AS k(u, c)
LEFT JOIN up ON up.user_id = k.u AND up.channel_id = k.c
LEFT JOIN read_receipts o ON o.user_id = k.u AND o.channel_id = k.c
LEFT JOIN user_settings s ON s.user_id = k.u`

// UpsertChanges is Upsert, also returning the change feed's entries: each
// public cursor (read, delivered; never the private read) of the states
// that Postgres holds at exactly the incoming position once the statement
// ran, for users who share that kind. So a move that advanced appears, a
// stale one (Postgres holds more) never does, and a replay of a move
// already written appears again: at least once, as a crash between the
// write and the feed's produce needs.
func (s *Store) UpsertChanges(ctx context.Context, states []receipt.State) ([]CursorChange, error) {
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
	rows, err := s.pool.Query(ctx, upsertChangesSQL, upsertArgs(sorted)...)
	if err != nil {
		return nil, classify(err)
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
		return nil, classify(err)
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
