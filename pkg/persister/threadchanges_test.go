package persister

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// TestThreadChangesFeed: a thread statement through the sink gathers its
// public cursors' changes, whose records carry the root on the user's
// channel key.
func TestThreadChangesFeed(t *testing.T) {
	t.Parallel()
	store := pgtest.NewSchema(t).Store
	var feed changeSink
	k := thread.Key{User: "u", Ref: thread.Ref{Channel: "c", Root: 9}}
	n, err := feed.upsertThreads(threads.NewStore(store, nil))(context.Background(), []thread.State{
		{Key: k, Cursors: receipt.State{Read: receipt.Cursor{Position: receipt.Position{Seq: 3}, MessageID: "r3"}, UpdatedAtUnixMs: 5}},
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Len(t, feed.threadChanges, 2, "the read and the delivery it implies")
	for _, c := range feed.threadChanges {
		rec, err := threadChangeRecord("feed", c)
		require.NoError(t, err)
		require.Equal(t, "u:c", string(rec.Key))
		var got recordv1.ReadStateChange
		require.NoError(t, proto.Unmarshal(rec.Value, &got))
		require.Equal(t, int64(9), got.GetThreadRootSeq())
		require.Equal(t, int64(3), got.GetPosition().GetSeq())
		require.Equal(t, "r3", got.GetMessageId())
	}
}
