package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// unreadOf GETs a user's unread answer over REST.
func (tb *testBundle) unreadOf(t *testing.T, user string, query string) *receiptsv1.GetUnreadResponse {
	t.Helper()
	var out receiptsv1.GetUnreadResponse
	tb.doProto(t, http.MethodGet, "/v1/users/"+user+"/unread"+query, "", &out)
	return &out
}

// channelCounts finds one channel's counts in an unread answer.
func channelCounts(t *testing.T, u *receiptsv1.GetUnreadResponse, ch string) *receiptsv1.ChannelUnread {
	t.Helper()
	for _, c := range u.GetChannels() {
		if c.GetChannelId() == ch {
			return c
		}
	}
	t.Fatalf("channel %s not in %v", ch, u)
	return nil
}

// post notifies one message over REST.
func (tb *testBundle) post(t *testing.T, ch string, seq int, sender string, mentions ...string) *receiptsv1.NoticeResult {
	t.Helper()
	ms := "[]"
	if len(mentions) > 0 {
		ms = `["` + joinQuoted(mentions) + `"]`
	}
	var out receiptsv1.NotifyMessageResponse
	tb.doProto(t, http.MethodPost, "/v1/channels/"+ch+"/messages",
		fmt.Sprintf(`{"seq": %d, "message_id": "m%d", "sender_id": %q, "mentions": %s}`, seq, seq, sender, ms), &out)
	return out.GetResult()
}

// memberChannel makes user a member of ch and raises its head with a
// notice of sender's.
func (tb *testBundle) memberChannel(t *testing.T, ch, user string, head int, sender string) {
	t.Helper()
	var mem receiptsv1.MembershipResponse
	tb.doProto(t, http.MethodPut, "/v1/channels/"+ch+"/members/"+user, `{}`, &mem)
	tb.post(t, ch, head, sender)
}

func joinQuoted(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += `","`
		}
		out += x
	}
	return out
}

func TestChannelFlowREST(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})

	// Two members join an empty channel (join point: head 0).
	var mem receiptsv1.MembershipResponse
	tb.doProto(t, http.MethodPut, "/v1/channels/general/members/alice", `{}`, &mem)
	require.True(t, mem.GetChanged())
	require.True(t, mem.GetMembership().GetMember())
	require.Equal(t, receiptsv1.Durability_KAFKA, mem.GetDurability())
	tb.doProto(t, http.MethodPut, "/v1/channels/general/members/bob", ``, &mem)
	require.True(t, mem.GetChanged())

	// Bob posts 1..5 mentioning alice in 2 and 4, and a non-member in 3.
	for seq := 1; seq <= 5; seq++ {
		var res *receiptsv1.NoticeResult
		switch seq {
		case 2, 4:
			res = tb.post(t, "general", seq, "bob", "alice")
			require.Equal(t, []string{"alice"}, res.GetMentioned())
		case 3:
			res = tb.post(t, "general", seq, "bob", "mallory")
			require.Equal(t, []string{"mallory"}, res.GetMentionsDropped())
			require.Empty(t, res.GetMentioned())
		default:
			res = tb.post(t, "general", seq, "bob")
		}
		require.True(t, res.GetAdvanced())
		require.Equal(t, int64(seq), res.GetHead().GetPosition().GetSeq())
	}
	// A replayed notice does not move the head back.
	res := tb.post(t, "general", 2, "bob")
	require.False(t, res.GetAdvanced())
	require.Equal(t, int64(5), res.GetHead().GetPosition().GetSeq())

	u := tb.unreadOf(t, "alice", "")
	c := channelCounts(t, u, "general")
	require.Equal(t, int64(5), c.GetHead().GetSeq())
	require.Equal(t, int64(5), c.GetUnreadCount())
	require.Equal(t, int64(1), c.GetFirstUnreadSeq())
	require.Equal(t, int64(2), c.GetMentionCount())
	require.True(t, c.GetMember())
	require.Equal(t, int64(5), u.GetUnreadTotal())
	require.Equal(t, int64(2), u.GetMentionTotal())
	require.Equal(t, int64(1), u.GetChannelsWithUnread())
	// The sender has read what it sent.
	require.Zero(t, channelCounts(t, tb.unreadOf(t, "bob", ""), "general").GetUnreadCount())
	// Mallory was not mentioned anywhere.
	require.Empty(t, tb.unreadOf(t, "mallory", "").GetChannels())

	// Alice reads to 3: one mention left.
	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/alice/channels/general/read", `{"seq": 3}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	c = channelCounts(t, tb.unreadOf(t, "alice", ""), "general")
	require.Equal(t, int64(2), c.GetUnreadCount())
	require.Equal(t, int64(1), c.GetMentionCount())
	require.Equal(t, int64(4), c.GetFirstUnreadSeq())

	// Mark unread from 2: her own read (1, 1); mention 2 counts again; the
	// public read stays at 3.
	tb.doProto(t, http.MethodPost, "/v1/users/alice/channels/general/unread", `{"seq": 2}`, &mr)
	require.Equal(t, int64(0), mr.GetResult().GetEpoch(), "the epoch the mark-unread saw")
	require.Equal(t, int64(1), mr.GetResult().GetState().GetPrivateRead().GetPosition().GetEpoch())
	require.Equal(t, int64(1), mr.GetResult().GetState().GetPrivateRead().GetPosition().GetSeq())
	require.Equal(t, int64(3), mr.GetResult().GetState().GetRead().GetPosition().GetSeq())
	c = channelCounts(t, tb.unreadOf(t, "alice", ""), "general")
	require.Equal(t, int64(4), c.GetUnreadCount())
	require.Equal(t, int64(2), c.GetMentionCount())
	require.Equal(t, int64(3), c.GetPublicRead().GetSeq())
	require.Equal(t, int64(0), c.GetPublicRead().GetEpoch())

	// A stale read of the old epoch is refused and changes nothing.
	tb.doProto(t, http.MethodPost, "/v1/users/alice/channels/general/read", `{"seq": 3, "epoch": 0}`, &mr)
	require.False(t, mr.GetResult().GetAdvanced())
	require.Equal(t, int64(4), channelCounts(t, tb.unreadOf(t, "alice", ""), "general").GetUnreadCount())
	// A read at the new epoch (explicit or implicit) advances.
	tb.doProto(t, http.MethodPost, "/v1/users/alice/channels/general/read", `{"seq": 2, "epoch": 1}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	require.Equal(t, int64(3), channelCounts(t, tb.unreadOf(t, "alice", ""), "general").GetUnreadCount())

	// A private read moves alice's counts, not her public cursor.
	tb.doProto(t, http.MethodPost, "/v1/users/alice/channels/general/read", `{"seq": 4, "private": true}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	c = channelCounts(t, tb.unreadOf(t, "alice", ""), "general")
	require.Equal(t, int64(1), c.GetUnreadCount())
	require.Equal(t, int64(4), c.GetRead().GetSeq())
	require.Equal(t, int64(3), c.GetPublicRead().GetSeq())
	require.Zero(t, c.GetMentionCount())

	// Read-all reads to the head, publicly.
	var ra receiptsv1.ReadAllResponse
	tb.doProto(t, http.MethodPost, "/v1/users/alice/read-all", `{}`, &ra)
	require.Len(t, ra.GetResults(), 1)
	c = channelCounts(t, tb.unreadOf(t, "alice", ""), "general")
	require.Zero(t, c.GetUnreadCount())
	require.Equal(t, int64(5), c.GetPublicRead().GetSeq())

	// The channel: head, members.
	var ch receiptsv1.GetChannelResponse
	tb.doProto(t, http.MethodGet, "/v1/channels/general", "", &ch)
	require.Equal(t, int64(5), ch.GetHead().GetPosition().GetSeq())
	require.Equal(t, int64(2), ch.GetMemberCount())
	require.Equal(t, []string{"alice", "bob"}, ch.GetMembers())
	tb.doProto(t, http.MethodGet, "/v1/channels/general?page_size=1", "", &ch)
	require.Equal(t, []string{"alice"}, ch.GetMembers())
	tb.doProto(t, http.MethodGet, "/v1/channels/general?page_size=1&page_token="+ch.GetNextPageToken(), "", &ch)
	require.Equal(t, []string{"bob"}, ch.GetMembers())
	require.Empty(t, ch.GetNextPageToken())

	// Alice leaves: the channel drops out of her default set; a re-join
	// starts at the head.
	tb.doProto(t, http.MethodDelete, "/v1/channels/general/members/alice", "", &mem)
	require.True(t, mem.GetChanged())
	require.False(t, mem.GetMembership().GetMember())
	require.Empty(t, tb.unreadOf(t, "alice", "").GetChannels())
	require.Len(t, tb.unreadOf(t, "alice", "?channel_id=general").GetChannels(), 1)
	tb.post(t, "general", 6, "bob")
	tb.doProto(t, http.MethodPut, "/v1/channels/general/members/alice", `{}`, &mem)
	require.True(t, mem.GetChanged())
	require.Equal(t, int64(6), mem.GetMembership().GetJoinSeq())
	require.Zero(t, channelCounts(t, tb.unreadOf(t, "alice", ""), "general").GetUnreadCount())
}

func TestChannelRulesRefuse(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	tb.memberChannel(t, "c", "alice", 10, "alice")
	hw := tb.highWatermarks(t)

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		reason                   apierr.Reason
		field                    string
		msg                      string
	}{
		{"read beyond head", "POST", "/v1/users/alice/channels/c/read", `{"seq": 11}`, 409, apierr.HeadBehind, "seq", "seq: seq beyond channel head (seq 11, head 10)"},
		{"delivered beyond head", "POST", "/v1/users/alice/channels/c/delivered", `{"seq": 11}`, 409, apierr.HeadBehind, "seq", "seq beyond channel head"},
		{"batch beyond head", "POST", "/v1/receipts:mark", `{"receipts": [{"user_id": "alice", "channel_id": "c", "kind": "READ", "seq": 1},
			{"user_id": "alice", "channel_id": "c", "kind": "READ", "seq": 12}]}`, 409, apierr.HeadBehind, "receipts[1].seq", "receipts[1].seq: seq beyond channel head"},
		{"mark-unread beyond head", "POST", "/v1/users/alice/channels/c/unread", `{"seq": 11}`, 409, apierr.HeadBehind, "seq", "seq beyond channel head"},
		{"join beyond head", "PUT", "/v1/channels/c/members/bob", `{"seq": 11}`, 400, apierr.SeqBeyondHead, "seq", "seq: seq beyond channel head"},
		{"non-member mark", "POST", "/v1/users/bob/channels/c/read", `{"seq": 1}`, 403, apierr.NotAMember, "user_id", `user_id: "bob" is not a member of channel "c"`},
		{"non-member in batch", "POST", "/v1/receipts:mark", `{"receipts": [{"user_id": "alice", "channel_id": "c", "kind": "READ", "seq": 1},
			{"user_id": "bob", "channel_id": "c", "kind": "DELIVERED", "seq": 1}]}`, 403, apierr.NotAMember, "receipts[1].user_id", `receipts[1].user_id: "bob" is not a member`},
		{"non-member mark-unread", "POST", "/v1/users/bob/channels/c/unread", `{"seq": 1}`, 403, apierr.NotAMember, "user_id", "not a member"},
		{"private delivered", "POST", "/v1/users/alice/channels/c/delivered", `{"seq": 1, "private": true}`, 400, apierr.InvalidField, "private", "private: applies to READ marks only"},
		{"negative epoch", "POST", "/v1/users/alice/channels/c/read", `{"seq": 1, "epoch": -1}`, 400, apierr.InvalidEpoch, "epoch", "epoch: must be >= 0, got -1"},
	} {
		status, body := tb.do(t, tc.method, tc.path, tc.body)
		apierrtest.RefusedREST(t, status, body, tc.status, tc.reason, tc.name)
		require.Equal(t, tc.field, apierr.InfoOfREST(body).GetMetadata()["field"], tc.name)
		require.Contains(t, parseRESTError(t, body).Message, tc.msg, tc.name)
	}
	require.Equal(t, hw, tb.highWatermarks(t), "nothing was produced")
	st, _, err := cursors.NewStore(tb.store).Get(context.Background(), "alice", []string{"c"})
	require.NoError(t, err)
	require.Equal(t, int64(10), st[0].Read.Position.Seq)
	st, _, err = cursors.NewStore(tb.store).Get(context.Background(), "bob", nil)
	require.NoError(t, err)
	require.Empty(t, st)

	// The same over gRPC: the codes and reasons.
	_, err = tb.client().MarkRead(context.Background(), connect.NewRequest(&receiptsv1.MarkRequest{UserId: "bob", ChannelId: "c", Seq: 1}))
	apierrtest.Refused(t, err, connect.CodePermissionDenied, apierr.NotAMember)
	_, err = tb.client().MarkRead(context.Background(), connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "c", Seq: 99}))
	apierrtest.Refused(t, err, connect.CodeAborted, apierr.HeadBehind)
	_ = receipt.Key{}
}

// A read, delivered or batch mark beyond the head the service knows is a
// race with its message's notice, answered as one: 409 / Aborted with
// HEAD_BEHIND and a Retry-After, and the same call succeeds once the
// notice is in. A seq ≤ 0 stays a bad request.
func TestMarkBeforeItsNoticeIsARace(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	tb.memberChannel(t, "c", "alice", 10, "bob")

	resp, body := tb.doResp(t, http.MethodPost, "/v1/users/alice/channels/c/read", `{"seq": 11}`)
	apierrtest.RefusedREST(t, resp.StatusCode, body, http.StatusConflict, apierr.HeadBehind)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Equal(t, map[string]string{"field": "seq", "head": "10", "retry_after_seconds": "1"}, apierr.InfoOfREST(body).GetMetadata())

	for name, client := range map[string]receiptsv1connect.ReceiptServiceClient{
		"gRPC": tb.client(connect.WithGRPC()), "Connect": tb.client(),
	} {
		_, err := client.MarkDelivered(context.Background(), connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "c", Seq: 11}))
		apierrtest.Refused(t, err, connect.CodeAborted, apierr.HeadBehind, name)
		require.Equal(t, "1", apierr.InfoOf(err).GetMetadata()["retry_after_seconds"], name)
		var cerr *connect.Error
		require.ErrorAs(t, err, &cerr)
		require.Equal(t, "1", cerr.Meta().Get("Retry-After"), "%s: the retry delay in the call's metadata", name)
	}
	status, body := tb.do(t, http.MethodPost, "/v1/users/alice/channels/c/read", `{"seq": 0}`)
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidSeq)

	tb.post(t, "c", 11, "bob")
	var ok receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/alice/channels/c/read", `{"seq": 11}`, &ok)
	require.True(t, ok.GetResult().GetAdvanced(), "the retry after the notice is taken")
}

// Calls that share a flush are checked one by one: concurrent members'
// marks are written while a non-member's and a beyond-head mark in the
// same flushes are refused alone, with nothing of theirs written.
func TestChannelRulesRefuseEachCallOfASharedFlush(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	var mem receiptsv1.MembershipResponse
	members := []string{"m0", "m1", "m2", "m3", "m4", "m5"}
	for _, u := range members {
		tb.doProto(t, http.MethodPut, "/v1/channels/c/members/"+u, `{}`, &mem)
	}
	tb.post(t, "c", 10, "m0")

	const rounds = 20
	type call struct {
		path, body string
		status     int
	}
	var calls []call
	for r := range rounds {
		for _, u := range members {
			calls = append(calls, call{"/v1/users/" + u + "/channels/c/read", fmt.Sprintf(`{"seq": %d}`, r%10+1), 200})
		}
		calls = append(calls, call{"/v1/users/outsider/channels/c/read", `{"seq": 1}`, 403})
		calls = append(calls, call{"/v1/users/m1/channels/c/read", `{"seq": 11}`, 409})
	}
	var wg sync.WaitGroup
	statuses := make([]int, len(calls))
	bodies := make([][]byte, len(calls))
	for i, c := range calls {
		wg.Go(func() { statuses[i], bodies[i] = tb.do(t, http.MethodPost, c.path, c.body) })
	}
	wg.Wait()
	reasons := map[int]apierr.Reason{403: apierr.NotAMember, 409: apierr.HeadBehind}
	for i, c := range calls {
		if c.status == 200 {
			require.Equal(t, c.status, statuses[i], "%s %s: %s", c.path, c.body, bodies[i])
			continue
		}
		apierrtest.RefusedREST(t, statuses[i], bodies[i], c.status, reasons[c.status], "%s %s", c.path, c.body)
	}
	st, _, err := cursors.NewStore(tb.store).Get(context.Background(), "outsider", nil)
	require.NoError(t, err)
	require.Empty(t, st, "a refused call wrote nothing")
	for _, u := range members {
		st, _, err := cursors.NewStore(tb.store).Get(context.Background(), u, []string{"c"})
		require.NoError(t, err)
		require.Equal(t, int64(10), st[0].Read.Position.Seq, u)
	}
}

// Both stores bound a user's default channel set alike.
func TestUnreadCapIsPostgres(t *testing.T) {
	t.Parallel()
	require.Equal(t, pgstore.MaxChannelsPerRead, redisstore.MaxUnreadChannels)
}
