package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// TestUpsertThreadChanges: a thread read that advances appears with its
// delivery, a stale one and a private read never do, a replay appears
// again, and an unshared kind stays out.
func TestUpsertThreadChanges(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t).Store
	ctx := context.Background()
	hideReads(t, s, "quiet")
	key := func(user string) thread.Key { return thread.Key{User: user, Ref: thread.Ref{Channel: "c", Root: 2}} }
	read := func(user string, seq int64) thread.State {
		return thread.State{Key: key(user), Cursors: receipt.State{Read: pos(0, seq), UpdatedAtUnixMs: 7}}
	}
	changes, err := s.UpsertThreadChanges(ctx, []thread.State{read("a", 4), read("quiet", 3),
		{Key: key("p"), Cursors: receipt.State{PrivateRead: pos(0, 5)}}}, 0)
	require.NoError(t, err)
	require.ElementsMatch(t, []pgstore.ThreadCursorChange{
		{Key: key("a"), Cursor: pos(0, 4), AtUnixMs: 7},
		{Key: key("a"), Delivered: true, Cursor: pos(0, 4), AtUnixMs: 7},
		{Key: key("quiet"), Delivered: true, Cursor: pos(0, 3), AtUnixMs: 7},
	}, changes)

	changes, err = s.UpsertThreadChanges(ctx, []thread.State{read("a", 2)}, 0)
	require.NoError(t, err)
	require.Empty(t, changes, "a stale read")
	changes, err = s.UpsertThreadChanges(ctx, []thread.State{read("a", 4)}, 0)
	require.NoError(t, err)
	require.Len(t, changes, 2, "a replay appears again")
}

// hideReads stores settings by which user shares deliveries but not
// reads: the change feeds read the settings row in their own statements
// (the kind's own writes are pkg/kinds/settings').
func hideReads(t *testing.T, s *pgstore.Store, user string) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), `INSERT INTO user_settings (user_id, share_read, share_delivered, version_ms) VALUES ($1, false, true, 1)`, user)
	require.NoError(t, err)
}
