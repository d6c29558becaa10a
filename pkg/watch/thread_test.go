package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/watch"
)

// TestThreadMovesBesideChannelCursors: a member's thread cursor and a
// thread's head arrive as their own updates, coalesced apart from the
// member's channel cursor of the same kind.
func TestThreadMovesBesideChannelCursors(t *testing.T) {
	t.Parallel()
	v := newView(t, 10000)
	h := startHub(t, v, watch.Config{Coalesce: 200 * time.Millisecond})
	sub, err := h.Subscribe(context.Background(), []string{"c"}, "")
	require.NoError(t, err)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = sub.Next(ctx) // the opening snapshot
	require.NoError(t, err)

	add := func(values ...any) {
		require.NoError(t, v.rdb.XAdd(ctx, &redis.XAddArgs{Stream: v.prefix + "cv:{c}:s", Values: values}).Err())
	}
	v.mark(t, "c", "a", receiptsv1.Kind_READ, 5)
	add("k", "tr", "root", "2", "u", "a", "e", "0", "s", "3", "t", "100")
	add("k", "th", "root", "2", "e", "0", "s", "6", "t", "101")
	add("k", "th", "root", "2", "e", "0", "s", "7", "t", "102")
	add("k", "tr", "root", "0", "u", "a", "e", "0", "s", "9", "t", "103") // no root: skipped

	channel, threadRead := int64(0), int64(0)
	var head *receiptsv1.ThreadHeadUpdate
	for channel == 0 || threadRead == 0 || head.GetHead().GetSeq() < 7 {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		for _, u := range ev.GetUpdates() {
			require.Equal(t, "a", u.GetUserId())
			require.Equal(t, receiptsv1.Kind_READ, u.GetKind())
			switch u.GetThreadRootSeq() {
			case 0:
				channel = u.GetPosition().GetSeq()
			case 2:
				threadRead = u.GetPosition().GetSeq()
			default:
				t.Fatalf("unexpected root in %v", u)
			}
		}
		for _, th := range ev.GetThreadHeads() {
			require.Equal(t, "c", th.GetChannelId())
			require.Equal(t, int64(2), th.GetRootSeq())
			head = th
		}
	}
	require.Equal(t, int64(5), channel, "the thread read never overwrites the channel's")
	require.Equal(t, int64(3), threadRead)
	require.Equal(t, int64(102), head.GetAtUnixMs())
}
