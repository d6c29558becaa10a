package gate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/redistest"
)

// The inbox over REST, gRPC and Connect: a user's channels newest activity
// first, paged without duplicates or gaps, each line with GetUnread's
// counts and the id of its first unread message; a new message moves its
// channel to the top; bad tokens and limits are refused; after Redis
// loses every key the same lines come back (ids excepted: Redis keeps
// them alone).
func TestInboxOrdersByActivityWithGetUnreadsCounts(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	tb := setup(t, setupOpts{config: func(c *testConfig) {
		c.Clock = func() time.Time { return time.UnixMilli(clock.Add(1000)) }
	}})
	startPersister(t, tb)
	ctx := context.Background()
	connectCl, grpcCl := tb.client(), tb.client(connect.WithGRPC())
	rest := func(method, path, body string) []byte {
		t.Helper()
		status, b := tb.do(t, method, path, body)
		require.Equal(t, http.StatusOK, status, "%s %s: %s", method, path, b)
		return b
	}
	// Seven channels; channel ib<i> gets i+1 messages, the last at time i.
	const n = 7
	for i := range n {
		ch := fmt.Sprintf("ib%d", i)
		rest(http.MethodPut, "/v1/channels/"+ch+"/members/iu", `{}`)
		for q := 1; q <= i+1; q++ {
			rest(http.MethodPost, "/v1/channels/"+ch+"/messages", fmt.Sprintf(`{"seq": %d, "message_id": "%s-m%d", "sender_id": "x"}`, q, ch, q))
		}
	}
	rest(http.MethodPost, "/v1/users/iu/channels/ib4/read", `{"seq": 2}`)

	// All pages, each protocol in turn.
	type line struct {
		ch      string
		at      int64
		unread  int64
		firstID string
	}
	walk := func(limit int32) []line {
		t.Helper()
		var out []line
		token := ""
		for page := 0; ; page++ {
			var resp *receiptsv1.GetInboxResponse
			switch page % 3 {
			case 0:
				r, err := connectCl.GetInbox(ctx, connect.NewRequest(&receiptsv1.GetInboxRequest{UserId: "iu", Limit: limit, PageToken: token}))
				require.NoError(t, err)
				resp = r.Msg
			case 1:
				r, err := grpcCl.GetInbox(ctx, connect.NewRequest(&receiptsv1.GetInboxRequest{UserId: "iu", Limit: limit, PageToken: token}))
				require.NoError(t, err)
				resp = r.Msg
			default:
				var body struct {
					Lines []struct {
						Channel struct {
							ChannelID   string `json:"channelId"`
							UnreadCount string `json:"unreadCount"`
						} `json:"channel"`
						LastActivityUnixMs   string `json:"lastActivityUnixMs"`
						FirstUnreadMessageID string `json:"firstUnreadMessageId"`
					} `json:"lines"`
					NextPageToken string `json:"nextPageToken"`
				}
				require.NoError(t, json.Unmarshal(rest(http.MethodGet, fmt.Sprintf("/v1/users/iu/inbox?limit=%d&page_token=%s", limit, token), ""), &body))
				resp = &receiptsv1.GetInboxResponse{NextPageToken: body.NextPageToken}
				for _, l := range body.Lines {
					at, err := strconv.ParseInt(l.LastActivityUnixMs, 10, 64)
					require.NoError(t, err)
					var un int64
					if l.Channel.UnreadCount != "" { // protojson leaves 0 out
						un, err = strconv.ParseInt(l.Channel.UnreadCount, 10, 64)
						require.NoError(t, err)
					}
					resp.Lines = append(resp.Lines, &receiptsv1.InboxLine{Channel: &receiptsv1.ChannelUnread{ChannelId: l.Channel.ChannelID, UnreadCount: un},
						LastActivityUnixMs: at, FirstUnreadMessageId: l.FirstUnreadMessageID})
				}
			}
			require.LessOrEqual(t, len(resp.GetLines()), int(limit))
			for _, l := range resp.GetLines() {
				out = append(out, line{l.GetChannel().GetChannelId(), l.GetLastActivityUnixMs(), l.GetChannel().GetUnreadCount(), l.GetFirstUnreadMessageId()})
			}
			if resp.GetNextPageToken() == "" {
				return out
			}
			token = resp.GetNextPageToken()
		}
	}
	order := func(ls []line) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.ch)
		}
		return out
	}
	lines := walk(3)
	require.Equal(t, []string{"ib6", "ib5", "ib4", "ib3", "ib2", "ib1", "ib0"}, order(lines), "newest activity first, every channel once")
	for i := 1; i < len(lines); i++ {
		require.Greater(t, lines[i-1].at, lines[i].at)
	}
	// Counts are GetUnread's; the first unread message's id is known.
	unread, err := connectCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "iu"}))
	require.NoError(t, err)
	want := map[string]int64{}
	for _, c := range unread.Msg.GetChannels() {
		want[c.GetChannelId()] = c.GetUnreadCount()
	}
	for _, l := range lines {
		require.Equal(t, want[l.ch], l.unread, l.ch)
	}
	require.Equal(t, line{"ib4", lines[2].at, 3, "ib4-m3"}, lines[2], "read to 2 of 5: the first unread is message 3")
	require.Equal(t, "ib0-m1", lines[6].firstID)

	// A new message moves its channel to the top; a deleted first unread
	// message moves the id to the next.
	rest(http.MethodPost, "/v1/channels/ib1/messages", `{"seq": 3, "message_id": "ib1-m3", "sender_id": "x"}`)
	rest(http.MethodDelete, "/v1/channels/ib4/messages/3", ``)
	lines = walk(2)
	require.Equal(t, []string{"ib1", "ib6", "ib5", "ib4", "ib3", "ib2", "ib0"}, order(lines))
	require.Equal(t, "ib4-m4", lines[3].firstID)
	require.Equal(t, int64(2), lines[3].unread)

	// Refusals.
	for _, tc := range []struct {
		req  *receiptsv1.GetInboxRequest
		want apierr.Reason
	}{
		{&receiptsv1.GetInboxRequest{UserId: "iu", Limit: 201}, apierr.InvalidField},
		{&receiptsv1.GetInboxRequest{UserId: "iu", Limit: -1}, apierr.InvalidField},
		{&receiptsv1.GetInboxRequest{UserId: "iu", PageToken: "!!"}, apierr.InvalidField},
		{&receiptsv1.GetInboxRequest{UserId: "iu", PageToken: "bm90IGEgdG9rZW4"}, apierr.InvalidField},
		{&receiptsv1.GetInboxRequest{UserId: "a{b}"}, apierr.InvalidID},
	} {
		_, err := connectCl.GetInbox(ctx, connect.NewRequest(tc.req))
		apierrtest.Refused(t, err, connect.CodeInvalidArgument, tc.want)
	}
	status, body := tb.do(t, http.MethodGet, "/v1/users/iu/inbox?limit=500", "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidField)

	// Redis loses everything: the same order and counts, from Postgres.
	var chs []string
	for i := range n {
		chs = append(chs, fmt.Sprintf("ib%d", i))
	}
	require.Eventually(t, func() bool {
		heads, err := tb.schema.Store.Heads(ctx, chs)
		require.NoError(t, err)
		dels, err := tb.schema.Store.Deletions(ctx, []string{"ib4"})
		require.NoError(t, err)
		sts, err := tb.schema.Store.Get(ctx, "iu", []string{"ib4"})
		require.NoError(t, err)
		return len(heads) == n && heads[1].Seq == 3 && len(dels) == 1 && len(sts) == 1 && sts[0].Read.Position.Seq == 2
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the heads, the deletion and the read")
	redistest.DeletePrefix(ctx, tb.rdb, tb.prefix)
	after := walk(4)
	require.Equal(t, order(lines), order(after))
	for i := range after {
		require.Equal(t, lines[i].unread, after[i].unread)
	}
}
