package gate_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// TestWatchThreadMoves: a channel's watchers see a reply as the thread's
// head and a member's public thread read with its root, never a private
// thread read, and the thread read does not stand for a channel read.
func TestWatchThreadMoves(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range []string{"wt1", "wt2", "wt3"} {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/wtc/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
	}
	status, body := tb.do(t, http.MethodPost, "/v1/channels/wtc/messages", `{"seq": 5, "message_id": "m5", "sender_id": "wt1"}`)
	require.Equal(t, http.StatusOK, status, "message: %s", body)

	var (
		mu      sync.Mutex
		updates []*receiptsv1.CursorUpdate
		heads   []*receiptsv1.ThreadHeadUpdate
	)
	done := watchSSEEvents(t, ctx, tb.h1, base, []string{"wtc"}, "", func(ev *receiptsv1.WatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		updates = append(updates, ev.GetUpdates()...)
		heads = append(heads, ev.GetThreadHeads()...)
	})

	status, body = tb.do(t, http.MethodPost, "/v1/channels/wtc/threads/2/messages", `{"seq": 3, "message_id": "r3", "sender_id": "wt1"}`)
	require.Equal(t, http.StatusOK, status, "reply: %s", body)
	cl := tb.client()
	_, err := cl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: "wt3", ChannelId: "wtc", RootSeq: 2, Seq: 3, Private: true}))
	require.NoError(t, err)
	_, err = cl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: "wt2", ChannelId: "wtc", RootSeq: 2, Seq: 2}))
	require.NoError(t, err)

	threadRead := func(user string) int64 {
		var seq int64
		for _, u := range updates {
			if u.GetUserId() == user && u.GetKind() == receiptsv1.Kind_READ && u.GetThreadRootSeq() == 2 {
				seq = max(seq, u.GetPosition().GetSeq())
			}
		}
		return seq
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return threadRead("wt2") == 2 && len(heads) > 0
	}, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	require.Equal(t, int64(3), heads[len(heads)-1].GetHead().GetSeq())
	require.Equal(t, int64(2), heads[len(heads)-1].GetRootSeq())
	require.Equal(t, int64(3), threadRead("wt1"), "the sender read its own reply")
	// wt3's private read was written before wt2's read, so its entry,
	// had there been one, came first on the stream.
	require.Zero(t, threadRead("wt3"), "never a private thread read")
	for _, u := range updates {
		if u.GetThreadRootSeq() == 0 {
			require.NotEqual(t, "wt2", u.GetUserId(), "a thread read is no channel read: %v", u)
		}
	}
	mu.Unlock()
	cancel()
	require.Error(t, <-done, "the client went away")
}
