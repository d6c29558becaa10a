package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/gate"
)

// A user's default channel set comes a page at a time, in channel order:
// the pages of GetUnread (over Connect and REST) and of GetReadState
// together answer exactly what one unpaged call does, left channels
// apart, and the badge totals of the pages sum to the unpaged ones.
func TestDefaultChannelSetPages(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	var channels []string
	for i := range 7 {
		ch := fmt.Sprintf("pg%d", i)
		channels = append(channels, ch)
		for _, step := range []struct{ method, path, body string }{
			{http.MethodPut, "/v1/channels/" + ch + "/members/pu", `{}`},
			{http.MethodPost, "/v1/channels/" + ch + "/messages", fmt.Sprintf(`{"seq": %d, "message_id": "m", "sender_id": "s", "mentions": ["pu"]}`, 3+i)},
			{http.MethodPost, "/v1/users/pu/channels/" + ch + "/read", `{"seq": 1}`},
		} {
			status, body := tb.do(t, step.method, step.path, step.body)
			require.Equal(t, http.StatusOK, status, "%s %s: %s", step.method, step.path, body)
		}
	}
	// Leaving pg3 drops it from the unread set (its cursor stays in the read state).
	status, body := tb.do(t, http.MethodDelete, "/v1/channels/pg3/members/pu", "")
	require.Equal(t, http.StatusOK, status, "%s", body)

	cl := tb.client()
	whole, err := cl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "pu"}))
	require.NoError(t, err)
	require.Len(t, whole.Msg.GetChannels(), 6)
	require.Empty(t, whole.Msg.GetNextPageToken())

	var got []string
	var unreadTotal, mentionTotal, withUnread int64
	token, pages := "", 0
	for {
		resp, err := cl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "pu", PageSize: 4, PageToken: token}))
		require.NoError(t, err)
		pages++
		require.LessOrEqual(t, len(resp.Msg.GetChannels()), 4)
		for _, c := range resp.Msg.GetChannels() {
			got = append(got, c.GetChannelId())
		}
		unreadTotal += resp.Msg.GetUnreadTotal()
		mentionTotal += resp.Msg.GetMentionTotal()
		withUnread += resp.Msg.GetChannelsWithUnread()
		if token = resp.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	require.Equal(t, 2, pages)
	require.Equal(t, []string{"pg0", "pg1", "pg2", "pg4", "pg5", "pg6"}, got)
	require.Equal(t, whole.Msg.GetUnreadTotal(), unreadTotal)
	require.Equal(t, whole.Msg.GetMentionTotal(), mentionTotal)
	require.Equal(t, whole.Msg.GetChannelsWithUnread(), withUnread)

	// REST: the same pages by query parameters.
	got, token = nil, ""
	for {
		var resp receiptsv1.GetUnreadResponse
		q := url.Values{"page_size": {"5"}}
		if token != "" {
			q.Set("page_token", token)
		}
		tb.doProto(t, http.MethodGet, "/v1/users/pu/unread?"+q.Encode(), "", &resp)
		for _, c := range resp.GetChannels() {
			got = append(got, c.GetChannelId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	require.Equal(t, []string{"pg0", "pg1", "pg2", "pg4", "pg5", "pg6"}, got)

	// The read state pages every channel with a cursor, pg3 included.
	got, token = nil, ""
	for {
		resp, err := cl.GetReadState(ctx, connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: "pu", PageSize: 3, PageToken: token}))
		require.NoError(t, err)
		require.LessOrEqual(t, len(resp.Msg.GetChannels()), 3)
		for _, c := range resp.Msg.GetChannels() {
			got = append(got, c.GetChannelId())
		}
		if token = resp.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	require.Equal(t, channels, got)

	// Refusals: paging a listed set, a page too large, a token not ours.
	for _, r := range []*receiptsv1.GetUnreadRequest{
		{UserId: "pu", ChannelId: []string{"pg1"}, PageSize: 2},
		{UserId: "pu", ChannelId: []string{"pg1"}, PageToken: "cGcx"},
		{UserId: "pu", PageSize: 10001},
		{UserId: "pu", PageSize: -1},
		{UserId: "pu", PageToken: "!!"},
	} {
		_, err := cl.GetUnread(ctx, connect.NewRequest(r))
		apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidField, "%v", r)
	}
	_, err = cl.GetReadState(ctx, connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: "pu", ChannelId: []string{"pg1"}, PageSize: 1}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidField)
	status, body = tb.do(t, http.MethodGet, "/v1/users/pu/unread?page_size=0&page_token=%21", "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidField)
}

// The in-memory cut the Postgres fallbacks use: after a token that is
// gone (the channel was left since), the page starts at the next one.
func TestPageOfChannels(t *testing.T) {
	all := []string{"a", "b", "c", "e"}
	for _, tc := range []struct {
		after string
		limit int
		want  []string
		more  bool
	}{
		{"", 0, all, false},
		{"", 2, []string{"a", "b"}, true},
		{"b", 2, []string{"c", "e"}, false},
		{"d", 1, []string{"e"}, false},
		{"e", 3, []string{}, false},
		{"", 4, all, false},
	} {
		got, more := gate.PageOfChannels(all, tc.after, tc.limit)
		require.Equal(t, tc.want, got, "after %q limit %d", tc.after, tc.limit)
		require.Equal(t, tc.more, more, "after %q limit %d", tc.after, tc.limit)
	}
}
