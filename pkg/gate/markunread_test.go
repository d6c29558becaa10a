package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
)

// receiptAPI is the slice of the service the mark-unread test drives, over
// one protocol.
type receiptAPI struct {
	markRead   func(user, ch string, seq int64, epoch *int64) *receiptsv1.ReceiptResult
	markUnread func(user, ch string, seq int64, epoch *int64) *receiptsv1.ReceiptResult
	unread     func(user, ch string) *receiptsv1.ChannelUnread
	receipts   func(ch string, seq int64) *receiptsv1.MessageReceipts
	ticks      func(ch string) *receiptsv1.ChannelTicks
}

func restAPI(t *testing.T, tb *testBundle) receiptAPI {
	body := func(seq int64, epoch *int64) string {
		if epoch == nil {
			return fmt.Sprintf(`{"seq": %d}`, seq)
		}
		return fmt.Sprintf(`{"seq": %d, "epoch": %d}`, seq, *epoch)
	}
	mark := func(verb string) func(user, ch string, seq int64, epoch *int64) *receiptsv1.ReceiptResult {
		return func(user, ch string, seq int64, epoch *int64) *receiptsv1.ReceiptResult {
			var mr receiptsv1.MarkResponse
			tb.doProto(t, http.MethodPost, "/v1/users/"+user+"/channels/"+ch+"/"+verb, body(seq, epoch), &mr)
			return mr.GetResult()
		}
	}
	return receiptAPI{
		markRead:   mark("read"),
		markUnread: mark("unread"),
		unread: func(user, ch string) *receiptsv1.ChannelUnread {
			return channelCounts(t, tb.unreadOf(t, user, "?channel_id="+ch), ch)
		},
		receipts: func(ch string, seq int64) *receiptsv1.MessageReceipts {
			var out receiptsv1.MessageReceipts
			tb.doProto(t, http.MethodGet, fmt.Sprintf("/v1/channels/%s/messages/%d/receipts?sender_id=bob", ch, seq), "", &out)
			return &out
		},
		ticks: func(ch string) *receiptsv1.ChannelTicks {
			var out receiptsv1.ChannelTicks
			tb.doProto(t, http.MethodGet, "/v1/channels/"+ch+"/ticks", "", &out)
			return &out
		},
	}
}

func rpcAPI(t *testing.T, c receiptsv1connect.ReceiptServiceClient) receiptAPI {
	ctx := context.Background()
	return receiptAPI{
		markRead: func(user, ch string, seq int64, epoch *int64) *receiptsv1.ReceiptResult {
			r, err := c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: user, ChannelId: ch, Seq: seq, Epoch: epoch}))
			require.NoError(t, err)
			return r.Msg.GetResult()
		},
		markUnread: func(user, ch string, seq int64, epoch *int64) *receiptsv1.ReceiptResult {
			r, err := c.MarkUnread(ctx, connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: user, ChannelId: ch, Seq: seq, Epoch: epoch}))
			require.NoError(t, err)
			return r.Msg.GetResult()
		},
		unread: func(user, ch string) *receiptsv1.ChannelUnread {
			r, err := c.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: user, ChannelId: []string{ch}}))
			require.NoError(t, err)
			return channelCounts(t, r.Msg, ch)
		},
		receipts: func(ch string, seq int64) *receiptsv1.MessageReceipts {
			r, err := c.GetMessageReceipts(ctx, connect.NewRequest(&receiptsv1.GetMessageReceiptsRequest{ChannelId: ch, Seq: seq, SenderId: "bob"}))
			require.NoError(t, err)
			return r.Msg
		},
		ticks: func(ch string) *receiptsv1.ChannelTicks {
			r, err := c.GetTicks(ctx, connect.NewRequest(&receiptsv1.GetTicksRequest{ChannelId: ch}))
			require.NoError(t, err)
			return r.Msg
		},
	}
}

// TestMarkUnreadIsPrivateAndIdempotent, over REST, gRPC and Connect: alice
// reads 10 and marks unread from 5. Her own counts show 6 unread from 5;
// bob still sees her read at 10 (receipts, ticks) and a watch stream never
// sees her read move back. The same call with the epoch it answered
// changes nothing, and a stale ack of the old epoch does not undo it.
func TestMarkUnreadIsPrivateAndIdempotent(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	apis := map[string]receiptAPI{
		"rest": restAPI(t, tb), "grpc": rpcAPI(t, tb.client(connect.WithGRPC())), "connect": rpcAPI(t, tb.client()),
	}
	channels := []string{"rest", "grpc", "connect"}
	for _, ch := range channels {
		for _, u := range []string{"alice", "bob", "carol"} {
			var mem receiptsv1.MembershipResponse
			tb.doProto(t, http.MethodPut, "/v1/channels/"+ch+"/members/"+u, `{}`, &mem)
		}
		for seq := 1; seq <= 10; seq++ {
			tb.post(t, ch, seq, "bob")
		}
	}

	// Every READ update of the watched channels, in order.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	reads := map[string][]int64{}
	done := watchSSEEvents(t, ctx, tb.h1, base, channels, "", func(ev *receiptsv1.WatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range ev.GetUpdates() {
			if u.GetKind() == receiptsv1.Kind_READ {
				k := u.GetChannelId() + "/" + u.GetUserId()
				reads[k] = append(reads[k], u.GetPosition().GetSeq())
			}
		}
	})
	seen := func(k string, seq int64) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reads[k]) > 0 && reads[k][len(reads[k])-1] == seq
	}

	for _, ch := range channels {
		api := apis[ch]
		require.True(t, api.markRead("alice", ch, 10, nil).GetAdvanced(), ch)
		require.Eventually(t, func() bool { return seen(ch+"/alice", 10) }, 20*time.Second, 10*time.Millisecond, ch)

		un := api.markUnread("alice", ch, 5, nil)
		require.True(t, un.GetAdvanced(), ch)
		require.Equal(t, int64(0), un.GetEpoch(), "%s: the epoch the mark-unread saw", ch)
		require.Equal(t, int64(10), un.GetState().GetRead().GetPosition().GetSeq(), ch)
		require.Equal(t, int64(1), un.GetState().GetPrivateRead().GetPosition().GetEpoch(), ch)
		require.Equal(t, int64(4), un.GetState().GetPrivateRead().GetPosition().GetSeq(), ch)

		check := func(step string) {
			t.Helper()
			c := api.unread("alice", ch)
			require.Equal(t, int64(6), c.GetUnreadCount(), "%s %s", ch, step)
			require.Equal(t, int64(5), c.GetFirstUnreadSeq(), "%s %s", ch, step)
			require.Equal(t, int64(4), c.GetRead().GetSeq(), "%s %s", ch, step)
			require.Equal(t, int64(1), c.GetRead().GetEpoch(), "%s %s: the epoch moved once", ch, step)
			require.Equal(t, int64(10), c.GetPublicRead().GetSeq(), "%s %s", ch, step)
			rc := api.receipts(ch, 10)
			require.Equal(t, []string{"alice"}, userIDs(rc.GetReadBy()), "%s %s: bob still sees alice's read", ch, step)
			var aliceRead int64
			for _, m := range api.ticks(ch).GetMembers() {
				if m.GetUserId() == "alice" {
					aliceRead = m.GetRead().GetSeq()
				}
			}
			require.Equal(t, int64(10), aliceRead, "%s %s: the ticks keep alice at 10", ch, step)
		}
		check("after the mark-unread")

		// The retry with the epoch answered: nothing changes.
		again := api.markUnread("alice", ch, 5, &un.Epoch)
		require.False(t, again.GetAdvanced(), "%s: a retried mark-unread is a no-op", ch)
		require.Equal(t, un.GetEpoch(), again.GetEpoch())
		check("after the retry")

		// An ack that was in flight (the old epoch, a higher seq).
		stale := api.markRead("alice", ch, 10, new(int64))
		require.False(t, stale.GetAdvanced(), ch)
		check("after a stale ack")

		// carol's read is the barrier: the watch stream sees it after
		// anything the mark-unread could have published for alice.
		api.markRead("carol", ch, 10, nil)
		require.Eventually(t, func() bool { return seen(ch+"/carol", 10) }, 20*time.Second, 10*time.Millisecond, ch)
	}
	mu.Lock()
	for _, ch := range channels {
		require.Equal(t, []int64{10}, reads[ch+"/alice"], "%s: the watch stream saw alice's read once, never moving back", ch)
	}
	mu.Unlock()
	cancel()
	require.Error(t, <-done, "the client went away")
}
