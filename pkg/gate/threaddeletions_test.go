package gate_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/thread"
)

// Deleted thread replies stop counting, over REST, gRPC and Connect: in
// the thread's unread count, first unread seq and mention count
// (ListThreads) and in GetUnread's unread_threads and
// thread_mention_count; a delete before its reply's notice applies, a
// repeat changes nothing, the channel's own counts and the thread cursor
// stay where they were, and the counts are the same after Redis loses
// every key.
func TestDeletedThreadRepliesStopCounting(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	startPersister(t, tb)
	ctx := context.Background()
	connectCl, grpcCl := tb.client(), tb.client(connect.WithGRPC())
	for _, u := range []string{"alice", "bob"} {
		tb.ok(t, http.MethodPut, "/v1/channels/tdc/members/"+u, `{}`)
	}
	for seq := 1; seq <= 5; seq++ {
		tb.post(t, "tdc", seq, "alice")
	}
	for _, body := range []string{`{"seq": 1, "sender_id": "alice"}`, `{"seq": 2, "sender_id": "alice"}`,
		`{"seq": 3, "sender_id": "alice", "mentions": ["bob"]}`, `{"seq": 4, "sender_id": "alice"}`, `{"seq": 5, "sender_id": "alice"}`} {
		tb.ok(t, http.MethodPost, "/v1/channels/tdc/threads/2/messages", body)
	}

	// unread, first unread, mentions and the read cursor of bob's thread;
	// then GetUnread's unread_threads, thread_mention_count and the
	// channel's own unread count.
	type counts struct{ unread, first, mentions, read, unreadThreads, threadMentions, channelUnread int64 }
	get := func() counts {
		t.Helper()
		lt, err := connectCl.ListThreads(ctx, connect.NewRequest(&receiptsv1.ListThreadsRequest{UserId: "bob"}))
		require.NoError(t, err)
		require.Len(t, lt.Msg.GetThreads(), 1)
		th := lt.Msg.GetThreads()[0]
		u, err := grpcCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "bob"}))
		require.NoError(t, err)
		require.Len(t, u.Msg.GetChannels(), 1)
		c := u.Msg.GetChannels()[0]
		return counts{th.GetUnreadCount(), th.GetFirstUnreadSeq(), th.GetMentionCount(), th.GetRead().GetSeq(),
			c.GetUnreadThreads(), c.GetThreadMentionCount(), c.GetUnreadCount()}
	}
	require.Equal(t, counts{5, 1, 1, 0, 1, 1, 5}, get())

	// 3 (REST): the mention goes with it; 1 (gRPC): the first unread skips it.
	tb.ok(t, http.MethodDelete, "/v1/channels/tdc/threads/2/messages/3", "")
	require.Equal(t, counts{4, 1, 0, 0, 1, 0, 5}, get(), "a deleted mention reply is no thread mention")
	del, err := grpcCl.DeleteThreadReply(ctx, connect.NewRequest(&receiptsv1.DeleteThreadReplyRequest{ChannelId: "tdc", RootSeq: 2, Seq: 1}))
	require.NoError(t, err)
	require.Equal(t, receiptsv1.Durability_KAFKA, del.Msg.GetDurability())
	require.False(t, del.Msg.GetRealtimeDegraded())
	require.Equal(t, counts{3, 2, 0, 0, 1, 0, 5}, get())

	// 7 in a notice batch (Connect) before its notice, then 6 and 7 notified.
	res, err := connectCl.NotifyMessages(ctx, connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
		{ChannelId: "tdc", ThreadRootSeq: 2, Seq: 7, Deleted: true}}}))
	require.NoError(t, err)
	require.Equal(t, receiptsv1.Durability_KAFKA, res.Msg.GetResults()[0].GetDurability())
	require.Equal(t, counts{3, 2, 0, 0, 1, 0, 5}, get())
	for _, body := range []string{`{"seq": 6, "sender_id": "alice"}`, `{"seq": 7, "sender_id": "alice", "mentions": ["bob"]}`} {
		tb.ok(t, http.MethodPost, "/v1/channels/tdc/threads/2/messages", body)
	}
	want := counts{4, 2, 0, 0, 1, 0, 5}
	require.Equal(t, want, get(), "a delete before its reply's notice applies")

	// A repeat, over every protocol: nothing changes.
	tb.ok(t, http.MethodDelete, "/v1/channels/tdc/threads/2/messages/3", "")
	_, err = connectCl.DeleteThreadReply(ctx, connect.NewRequest(&receiptsv1.DeleteThreadReplyRequest{ChannelId: "tdc", RootSeq: 2, Seq: 7}))
	require.NoError(t, err)
	require.Equal(t, want, get())
	ds, err := deletions.NewStore(nil, tb.store).ReadRedis(ctx, []thread.Ref{{Channel: "tdc"}})
	require.NoError(t, err)
	require.Equal(t, [][]int64{nil}, ds, "the channel's own set holds no reply")

	// Once the persister has them, after Redis loses every key: the same
	// counts, the thread's set hydrated.
	require.Eventually(t, func() bool {
		ds, err := deletions.NewStore(tb.schema.Store, nil).ReadPG(ctx, []thread.Ref{{Channel: "tdc", Root: 2}})
		require.NoError(t, err)
		return len(ds) == 1 && len(ds[0].Seqs) == 3
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the deletions")
	require.Eventually(t, func() bool {
		sts, err := threads.NewStore(tb.schema.Store, nil).StatesPG(ctx, []thread.Key{{User: "bob", Ref: thread.Ref{Channel: "tdc", Root: 2}}})
		require.NoError(t, err)
		hs, err := threads.NewStore(tb.schema.Store, nil).HeadsPG(ctx, []thread.Ref{{Channel: "tdc", Root: 2}})
		require.NoError(t, err)
		return len(sts) == 1 && len(sts[0].Mentions) == 2 && len(hs) == 1 && hs[0].Seq == 7
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the thread")
	redistest.DeletePrefix(ctx, tb.rdb, tb.prefix)
	require.Empty(t, tb.redisKeys(t))
	require.Equal(t, want, get(), "rebuilt from Postgres")
	require.Contains(t, tb.redisKeys(t), deletions.NewStore(nil, tb.store).RedisKey(thread.Ref{Channel: "tdc", Root: 2}), "the read hydrated the thread's deletions")

	// A read moves as before: to 4, the unread are 5 and 6.
	tb.ok(t, http.MethodPost, "/v1/users/bob/channels/tdc/threads/2/read", `{"seq": 4}`)
	require.Equal(t, counts{2, 5, 0, 4, 1, 0, 5}, get())

	// A mark-unread from 3 answers the counts without 3 and 7: 4, 5 and 6.
	mu, err := connectCl.MarkThreadUnread(ctx, connect.NewRequest(&receiptsv1.MarkThreadUnreadRequest{UserId: "bob", ChannelId: "tdc", RootSeq: 2, Seq: 3}))
	require.NoError(t, err)
	require.Equal(t, [3]int64{3, 4, 0}, [3]int64{mu.Msg.GetThread().GetUnreadCount(), mu.Msg.GetThread().GetFirstUnreadSeq(), mu.Msg.GetThread().GetMentionCount()})
	require.Equal(t, counts{3, 4, 0, 2, 1, 0, 5}, get())
}

// With Redis down, thread counts from Postgres alone leave the deleted
// replies out as Redis would.
func TestThreadDeletionsWithRedisDown(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = down.Close() })
	tb := setup(t, setupOpts{redis: down})
	ctx := context.Background()
	pg := tb.schema.Store
	ref := thread.Ref{Channel: "tpc", Root: 3}
	_, err := threads.NewStore(pg, nil).WriteHeadsPG(ctx, []thread.Head{{Ref: ref, Seq: 6, MessageID: "r6", UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	_, err = threads.NewStore(pg, nil).WriteStatesPG(ctx, []thread.State{{Key: thread.Key{User: "pu", Ref: ref},
		Cursors:  receipt.State{Read: receipt.Cursor{Position: receipt.Position{Seq: 1}}, UpdatedAtUnixMs: 1},
		Follow:   thread.Follow{Following: true, VersionUnixMs: 1},
		Mentions: []int64{2, 5}}})
	require.NoError(t, err)
	_, err = deletions.NewStore(pg, nil).WritePG(ctx, []channel.Deletions{{Channel: "tpc", Root: 3, Seqs: []int64{2, 3, 6}}, {Channel: "tpc", Seqs: []int64{4}}})
	require.NoError(t, err)

	lt, err := tb.client().ListThreads(ctx, connect.NewRequest(&receiptsv1.ListThreadsRequest{UserId: "pu"}))
	require.NoError(t, err)
	require.Len(t, lt.Msg.GetThreads(), 1)
	th := lt.Msg.GetThreads()[0]
	// Replies 2..6 unread, 2, 3 and 6 deleted: 4 and 5, the mention at 5.
	require.Equal(t, [3]int64{2, 4, 1}, [3]int64{th.GetUnreadCount(), th.GetFirstUnreadSeq(), th.GetMentionCount()})
}

// Bad thread deletes are refused with their reason and write nothing.
func TestDeleteThreadReplyBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	status, body := tb.do(t, http.MethodDelete, "/v1/channels/tdc/threads/2/messages/0", "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidSeq, "seq 0")
	status, body = tb.do(t, http.MethodDelete, "/v1/channels/tdc/threads/0/messages/1", "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidSeq, "root 0")
	_, err := tb.client(connect.WithGRPC()).DeleteThreadReply(ctx, connect.NewRequest(&receiptsv1.DeleteThreadReplyRequest{ChannelId: "a b", RootSeq: 2, Seq: 1}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidID, "grpc")
	for name, c := range map[string]struct {
		notice *receiptsv1.MessageNotice
		reason apierr.Reason
	}{
		"negative root": {&receiptsv1.MessageNotice{ChannelId: "tdc", ThreadRootSeq: -1, Seq: 3, Deleted: true}, apierr.InvalidSeq},
		"mentions":      {&receiptsv1.MessageNotice{ChannelId: "tdc", ThreadRootSeq: 2, Seq: 3, Deleted: true, Mentions: []string{"bob"}}, apierr.InvalidField},
	} {
		_, err = tb.client().NotifyMessages(ctx, connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{c.notice}}))
		apierrtest.Refused(t, err, connect.CodeInvalidArgument, c.reason, name)
	}
	require.Empty(t, tb.redisKeys(t))
	require.Zero(t, tb.highWatermarks(t))
}
