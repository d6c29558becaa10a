package rest

import (
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// The fast GetInbox writer answers as protojson does: channel and thread
// lines, empty ones, zero values left out, ids that need escaping.
func TestWriteGetInboxAsProtojson(t *testing.T) {
	t.Parallel()
	ch := &receiptsv1.ChannelUnread{ChannelId: "c", Head: &receiptsv1.Position{Seq: 9}, Read: &receiptsv1.Position{Epoch: 1, Seq: 2},
		PublicRead: &receiptsv1.Position{Seq: 2}, UnreadCount: 7, MentionCount: 1, FirstUnreadSeq: 3, Member: true, Level: "mentions",
		Muted: true, MutedUntilUnixMs: 1795869846095, UnreadThreads: 2, ThreadMentionCount: 1}
	th := &receiptsv1.ThreadUnread{ChannelId: "c", RootSeq: 3, Head: &receiptsv1.Position{Seq: 4}, Read: &receiptsv1.Position{},
		PublicRead: &receiptsv1.Position{}, UnreadCount: 4, FirstUnreadSeq: 1, Following: true, LastActivityUnixMs: 17}
	many := &receiptsv1.GetInboxResponse{UserId: "u", NextPageToken: "MTc5NTg2OTg0MzA5MiAwIGM"}
	for i := range 200 {
		l := &receiptsv1.InboxLine{LastActivityUnixMs: int64(1795869846095 - i), FirstUnreadMessageId: "m" + strconv.Itoa(i)}
		if i%3 == 0 {
			l.Thread = th
		} else {
			l.Channel = ch
		}
		many.Lines = append(many.Lines, l)
	}
	for name, resp := range map[string]*receiptsv1.GetInboxResponse{
		"empty":       {},
		"user only":   {UserId: "nobody"},
		"one channel": {UserId: "u", Lines: []*receiptsv1.InboxLine{{Channel: ch, LastActivityUnixMs: 5, FirstUnreadMessageId: "m3"}}},
		"one thread":  {UserId: "u", Lines: []*receiptsv1.InboxLine{{Thread: th, LastActivityUnixMs: 17}}, NextPageToken: "YQ"},
		"zero values": {UserId: "u", Lines: []*receiptsv1.InboxLine{{}, {Channel: &receiptsv1.ChannelUnread{}}, {Thread: &receiptsv1.ThreadUnread{}}}},
		"escaped ids": {UserId: `été"q\`, Lines: []*receiptsv1.InboxLine{{Channel: &receiptsv1.ChannelUnread{ChannelId: "\x01\"\\/<>&\u2028 日本 🙂"}, FirstUnreadMessageId: "\t\"x"}}},
		"a full page": many,
	} {
		w := httptest.NewRecorder()
		WriteGetInbox(w, resp)
		want, err := protojson.Marshal(resp)
		require.NoError(t, err)
		require.JSONEq(t, string(want), w.Body.String(), name)
		require.Equal(t, strconv.Itoa(w.Body.Len()), w.Header().Get("Content-Length"), name)
		var back receiptsv1.GetInboxResponse
		require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &back), name)
		require.True(t, proto.Equal(resp, &back), name)
	}
}

func TestInboxRouteAndQuery(t *testing.T) {
	t.Parallel()
	u, ok := InboxRoute("/v1/users/a%3Ab/inbox")
	require.True(t, ok)
	require.Equal(t, "a:b", u)
	for _, p := range []string{"/v1/users//inbox", "/v1/users/a/b/inbox", "/v1/users/a%zz/inbox", "/v1/users/u/unread"} {
		_, ok := InboxRoute(p)
		require.False(t, ok, p)
	}
	req, ok := InboxQuery("limit=5&pageToken=abc")
	require.True(t, ok)
	require.Equal(t, int32(5), req.GetLimit())
	require.Equal(t, "abc", req.GetPageToken())
	for _, q := range []string{"limit=x", "limit=1&limit=2", "page_token=a&pageToken=b", "color=red", "limit=%zz", "limit=99999999999"} {
		_, ok := InboxQuery(q)
		require.False(t, ok, q)
	}
}
