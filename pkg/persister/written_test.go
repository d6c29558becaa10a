package persister

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

// The written cache skips only rows that cannot change Postgres, in each
// cursor's order: after a read at 100, a mark-unread to (1, 49) and a read
// at (1, 60), a stale read of epoch 0 past 100 still raises the public
// read and a read of epoch 1 past 60 the own read; what neither raises is
// skipped.
func TestWrittenSkipsOnlyNoOps(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	pos := func(e, s int64) receipt.Cursor { return receipt.Cursor{Position: receipt.Position{Epoch: e, Seq: s}} }
	w := newWritten(10)
	w.remember([]receipt.State{{Key: k, Read: pos(0, 100), Delivered: pos(0, 100)}, receipt.MarkUnread(k, 50, 0)})
	w.remember([]receipt.State{{Key: k, Read: pos(1, 60), Delivered: pos(0, 60)}})
	kept := func(st receipt.State) bool { return len(w.filter([]receipt.State{st})) == 1 }
	require.True(t, kept(receipt.State{Key: k, Read: pos(0, 110)}), "a stale read past the public read raises it")
	require.True(t, kept(receipt.State{Key: k, Read: pos(1, 70)}), "a read of the new epoch raises the own read")
	require.True(t, kept(receipt.State{Key: k, PrivateRead: pos(1, 70)}))
	require.False(t, kept(receipt.State{Key: k, Read: pos(1, 55)}))
	require.False(t, kept(receipt.State{Key: k, Read: pos(0, 90)}))
	require.False(t, kept(receipt.MarkUnread(k, 50, 0)), "a duplicate mark-unread")
	require.False(t, kept(receipt.State{Key: k, PrivateRead: pos(1, 40)}))
}
