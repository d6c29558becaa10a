package threads

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// TestWriteChangesPG: a thread read that advances appears with its
// delivery, a stale one and a private read never do, a replay appears
// again, and an unshared kind stays out.
func TestWriteChangesPG(t *testing.T) {
	t.Parallel()
	s := NewStore(pgtest.NewSchema(t).Store, nil)
	ctx := context.Background()
	// quiet shares no reads.
	_, err := settings.NewStore(s.pg, nil).WritePG(ctx, []privacy.Settings{{User: "quiet", ShareDelivered: true, VersionMs: 1}})
	require.NoError(t, err)
	key := func(user string) thread.Key { return thread.Key{User: user, Ref: thread.Ref{Channel: "c", Root: 2}} }
	read := func(user string, seq int64) thread.State {
		return thread.State{Key: key(user), Cursors: receipt.State{Read: pos(0, seq), UpdatedAtUnixMs: 7}}
	}
	changes, err := s.WriteChangesPG(ctx, []thread.State{read("a", 4), read("quiet", 3),
		{Key: key("p"), Cursors: receipt.State{PrivateRead: pos(0, 5)}}})
	require.NoError(t, err)
	require.ElementsMatch(t, []CursorChange{
		{Key: key("a"), Cursor: pos(0, 4), AtUnixMs: 7},
		{Key: key("a"), Delivered: true, Cursor: pos(0, 4), AtUnixMs: 7},
		{Key: key("quiet"), Delivered: true, Cursor: pos(0, 3), AtUnixMs: 7},
	}, changes)

	changes, err = s.WriteChangesPG(ctx, []thread.State{read("a", 2)})
	require.NoError(t, err)
	require.Empty(t, changes, "a stale read")
	changes, err = s.WriteChangesPG(ctx, []thread.State{read("a", 4)})
	require.NoError(t, err)
	require.Len(t, changes, 2, "a replay appears again")
}
