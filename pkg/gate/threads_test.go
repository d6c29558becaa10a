package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/thread"
)

// A thread's life over REST, gRPC and Connect: replies raise the thread's
// head and never the channel's counts; the sender and the mentioned
// follow; counts fall as the follower reads; mark-unread, unfollow,
// follow and read-all move them as in a channel; read-by and ticks see
// the members' thread cursors; every write reaches Kafka as a thread
// event.
func TestThreadLifecycle(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	rest := func(method, path, body string, want int) []byte {
		t.Helper()
		status, b := tb.do(t, method, path, body)
		require.Equal(t, want, status, "%s %s: %s", method, path, b)
		return b
	}
	for _, u := range []string{"tu1", "tu2", "tu3"} {
		rest(http.MethodPut, "/v1/channels/tc/members/"+u, `{}`, http.StatusOK)
	}
	rest(http.MethodPost, "/v1/channels/tc/messages", `{"seq": 5, "message_id": "m5", "sender_id": "tu1"}`, http.StatusOK)

	connectCl, grpcCl := tb.client(), tb.client(connect.WithGRPC())
	// Replies: REST, then a batch notice over gRPC.
	rest(http.MethodPost, "/v1/channels/tc/threads/2/messages", `{"seq": 1, "message_id": "r1", "sender_id": "tu1", "mentions": ["tu3", "nobody"]}`, http.StatusOK)
	batch, err := grpcCl.NotifyMessages(ctx, connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
		{ChannelId: "tc", Seq: 6, MessageId: "m6", SenderId: "tu2"},
		{ChannelId: "tc", ThreadRootSeq: 2, Seq: 2, MessageId: "r2", SenderId: "tu2"},
	}}))
	require.NoError(t, err)
	require.Equal(t, int64(6), batch.Msg.GetResults()[0].GetHead().GetPosition().GetSeq())
	require.Equal(t, int64(2), batch.Msg.GetResults()[1].GetHead().GetPosition().GetSeq(), "the thread's head")

	threads := func(user string) []*receiptsv1.ThreadUnread {
		t.Helper()
		resp, err := connectCl.ListThreads(ctx, connect.NewRequest(&receiptsv1.ListThreadsRequest{UserId: user}))
		require.NoError(t, err)
		return resp.Msg.GetThreads()
	}
	one := func(user string) *receiptsv1.ThreadUnread {
		t.Helper()
		ts := threads(user)
		require.Len(t, ts, 1, user)
		return ts[0]
	}
	u3 := one("tu3")
	require.Equal(t, int64(2), u3.GetRootSeq())
	require.Equal(t, int64(2), u3.GetUnreadCount())
	require.Equal(t, int64(1), u3.GetMentionCount())
	require.Equal(t, int64(1), u3.GetFirstUnreadSeq())
	require.True(t, u3.GetFollowing())
	require.Equal(t, int64(1), one("tu1").GetUnreadCount(), "the sender read its own reply")
	require.Equal(t, int64(0), one("tu2").GetUnreadCount())

	unread := func(user string) *receiptsv1.GetUnreadResponse {
		t.Helper()
		resp, err := connectCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: user}))
		require.NoError(t, err)
		return resp.Msg
	}
	u := unread("tu3")
	require.Len(t, u.GetChannels(), 1)
	require.Equal(t, int64(6), u.GetChannels()[0].GetUnreadCount(), "the channel's count is its own 6 messages, never the replies")
	require.Equal(t, int64(1), u.GetChannels()[0].GetUnreadThreads())
	require.Equal(t, int64(1), u.GetChannels()[0].GetThreadMentionCount())
	require.Equal(t, int64(1), u.GetUnreadThreadsTotal())
	var restUnread receiptsv1.GetUnreadResponse
	tb.doProto(t, http.MethodGet, "/v1/users/tu3/unread", "", &restUnread)
	require.Equal(t, int64(1), restUnread.GetUnreadThreadsTotal(), "the fast REST path carries the thread counts")

	// Reading over gRPC: the mention is read, one reply left.
	mr, err := grpcCl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: "tu3", ChannelId: "tc", RootSeq: 2, Seq: 1, MessageId: "r1"}))
	require.NoError(t, err)
	require.True(t, mr.Msg.GetAdvanced())
	require.Equal(t, receiptsv1.Durability_KAFKA, mr.Msg.GetDurability())
	require.Equal(t, int64(1), mr.Msg.GetThread().GetUnreadCount())
	require.Equal(t, int64(0), mr.Msg.GetThread().GetMentionCount())
	// A stale epoch is a no-op; an epoch ahead is refused.
	stale, err := connectCl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: "tu3", ChannelId: "tc", RootSeq: 2, Seq: 2, Epoch: ptr(int64(0))}))
	require.NoError(t, err)
	require.True(t, stale.Msg.GetAdvanced(), "epoch 0 is the current epoch")

	// Mark-unread (REST) moves the own position back at the next epoch
	// (the public read stays); a read of the old epoch then loses; the
	// same call with the epoch it answered changes nothing.
	var tm receiptsv1.ThreadMarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/tu3/channels/tc/threads/2/unread", `{"seq": 1}`, &tm)
	require.True(t, tm.GetAdvanced())
	require.Equal(t, int64(0), tm.GetEpoch())
	require.Equal(t, int64(2), one("tu3").GetUnreadCount())
	again, err := connectCl.MarkThreadUnread(ctx, connect.NewRequest(&receiptsv1.MarkThreadUnreadRequest{UserId: "tu3", ChannelId: "tc", RootSeq: 2, Seq: 1, Epoch: ptr(tm.GetEpoch())}))
	require.NoError(t, err)
	require.False(t, again.Msg.GetAdvanced(), "a retried mark-unread is a no-op")
	require.Equal(t, int64(2), one("tu3").GetUnreadCount())
	stale, err = connectCl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: "tu3", ChannelId: "tc", RootSeq: 2, Seq: 2, Epoch: ptr(int64(0))}))
	require.NoError(t, err)
	require.False(t, stale.Msg.GetAdvanced())
	require.Equal(t, "STALE_EPOCH", stale.Msg.GetReason())
	require.Equal(t, int64(2), one("tu3").GetUnreadCount())
	_, err = connectCl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: "tu3", ChannelId: "tc", RootSeq: 2, Seq: 1, Epoch: ptr(int64(7))}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))

	// Unfollow (REST), follow (Connect).
	rest(http.MethodDelete, "/v1/users/tu3/channels/tc/threads/2/follow", "", http.StatusOK)
	require.Empty(t, threads("tu3"))
	require.Equal(t, int64(0), unread("tu3").GetUnreadThreadsTotal())
	fr, err := connectCl.FollowThread(ctx, connect.NewRequest(&receiptsv1.FollowThreadRequest{UserId: "tu3", ChannelId: "tc", RootSeq: 2}))
	require.NoError(t, err)
	require.True(t, fr.Msg.GetThread().GetFollowing())
	require.Equal(t, int64(2), one("tu3").GetUnreadCount())

	// Read-by and ticks of the thread's replies.
	var rc receiptsv1.MessageReceipts
	tb.doProto(t, http.MethodGet, "/v1/channels/tc/threads/2/messages/2/receipts", "", &rc)
	require.True(t, rc.GetDetailed())
	require.Equal(t, int64(2), rc.GetThreadRootSeq())
	require.Equal(t, []string{"tu2", "tu3"}, userIDs(rc.GetReadBy()), "tu3's mark-unread is private")
	require.Equal(t, []string{"tu1"}, rc.GetPending())
	ticks, err := grpcCl.GetThreadTicks(ctx, connect.NewRequest(&receiptsv1.GetThreadTicksRequest{ChannelId: "tc", RootSeq: 2}))
	require.NoError(t, err)
	require.Equal(t, int64(2), ticks.Msg.GetHead().GetSeq())
	require.Equal(t, int64(1), ticks.Msg.GetReadByAllUpTo(), "tu3's mark-unread is private: only tu1 holds it back")
	require.Len(t, ticks.Msg.GetMembers(), 3)

	// Read-all reads the followed threads too.
	rest(http.MethodPost, "/v1/users/tu3/read-all", `{}`, http.StatusOK)
	require.Equal(t, int64(0), one("tu3").GetUnreadCount())
	require.Equal(t, int64(0), unread("tu3").GetUnreadThreadsTotal())

	// Leaving the channel ends the follow.
	rest(http.MethodDelete, "/v1/channels/tc/members/tu1", "", http.StatusOK)
	require.Empty(t, threads("tu1"))

	// Every thread write reached Kafka as a thread event.
	tb.decodedUntil(t, func(ds []event.Decoded) bool {
		var heads, regs int
		for _, d := range ds {
			if d.ThreadHead != nil {
				heads++
			}
			if d.Thread != nil {
				regs++
			}
		}
		return heads >= 2 && regs >= 8
	})
}

func ptr[T any](v T) *T { return &v }

// Thread writes are checked as channel marks are: ids and seqs, the root
// at most the channel head, the read at most the thread head, membership.
func TestThreadWritesRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	for _, step := range []struct{ method, path, body string }{
		{http.MethodPut, "/v1/channels/rc/members/ru1", `{}`},
		{http.MethodPut, "/v1/channels/rc/members/ru2", `{}`},
		{http.MethodPost, "/v1/channels/rc/messages", `{"seq": 3, "sender_id": "ru1"}`},
		{http.MethodPost, "/v1/channels/rc/threads/3/messages", `{"seq": 2, "sender_id": "ru1"}`},
	} {
		status, body := tb.do(t, step.method, step.path, step.body)
		require.Equal(t, http.StatusOK, status, "%s %s: %s", step.method, step.path, body)
	}
	for _, c := range []struct {
		method, path, body, reason string
		status                     int
	}{
		{http.MethodPost, "/v1/channels/rc/threads/4/messages", `{"seq": 1}`, "HEAD_BEHIND", http.StatusConflict},
		{http.MethodPost, "/v1/channels/rc/threads/0/messages", `{"seq": 1}`, "INVALID_SEQ", http.StatusBadRequest},
		{http.MethodPost, "/v1/channels/rc/threads/3/messages", `{"seq": 0}`, "INVALID_SEQ", http.StatusBadRequest},
		{http.MethodPost, "/v1/users/ru2/channels/rc/threads/3/read", `{"seq": 3}`, "HEAD_BEHIND", http.StatusConflict},
		{http.MethodPost, "/v1/users/ru2/channels/rc/threads/9/read", `{"seq": 1}`, "HEAD_BEHIND", http.StatusConflict},
		{http.MethodPost, "/v1/users/ru9/channels/rc/threads/3/read", `{"seq": 1}`, "NOT_A_MEMBER", http.StatusForbidden},
		{http.MethodPut, "/v1/users/ru9/channels/rc/threads/3/follow", `{}`, "NOT_A_MEMBER", http.StatusForbidden},
		{http.MethodPost, "/v1/users/ru2/channels/rc/threads/3/unread", `{"seq": 0}`, "INVALID_SEQ", http.StatusBadRequest},
		{http.MethodGet, "/v1/users/ru2/threads?limit=5000", "", "INVALID_FIELD", http.StatusBadRequest},
		{http.MethodGet, "/v1/users/ru2/threads?page_token=nope", "", "INVALID_FIELD", http.StatusBadRequest},
	} {
		status, body := tb.do(t, c.method, c.path, c.body)
		require.Equal(t, c.status, status, "%s %s: %s", c.method, c.path, body)
		require.Equal(t, c.reason, apierr.InfoOfREST(body).GetReason(), "%s %s: %s", c.method, c.path, body)
	}
}

// The followed-threads list pages newest activity first.
func TestFollowedThreadsPages(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	status, body := tb.do(t, http.MethodPost, "/v1/channels/lc/messages", `{"seq": 10}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	for root := int64(1); root <= 7; root++ {
		status, body := tb.do(t, http.MethodPost, fmt.Sprintf("/v1/channels/lc/threads/%d/messages", root), `{"seq": 1, "sender_id": "x", "mentions": ["lu"]}`)
		require.Equal(t, http.StatusOK, status, "%s", body)
	}
	cl := tb.client()
	var got []thread.Ref
	token := ""
	for {
		resp, err := cl.ListThreads(ctx, connect.NewRequest(&receiptsv1.ListThreadsRequest{UserId: "lu", Limit: 3, PageToken: token}))
		require.NoError(t, err)
		for _, th := range resp.Msg.GetThreads() {
			got = append(got, thread.Ref{Channel: th.GetChannelId(), Root: th.GetRootSeq()})
			require.Equal(t, int64(1), th.GetUnreadCount())
		}
		if token = resp.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	require.Len(t, got, 7)
	seen := map[thread.Ref]bool{}
	for _, r := range got {
		require.False(t, seen[r], "a thread on two pages")
		seen[r] = true
	}
}
