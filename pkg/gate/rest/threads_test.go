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

// The fast ListThreads writer answers as protojson does: empty answers,
// zero values left out (an empty position written as {}), ids that need
// escaping, large values, the page token.
func TestWriteListThreadsAsProtojson(t *testing.T) {
	t.Parallel()
	full := &receiptsv1.ThreadUnread{
		ChannelId: "c", RootSeq: 3, Head: &receiptsv1.Position{Seq: 9}, Read: &receiptsv1.Position{Epoch: 1, Seq: 2},
		PublicRead: &receiptsv1.Position{Seq: 2}, UnreadCount: 7, MentionCount: 1, MentionsCapped: true, FirstUnreadSeq: 3,
		Following: true, LastActivityUnixMs: 1795869846095,
	}
	many := &receiptsv1.ListThreadsResponse{UserId: "u", NextPageToken: "MTc5NTg2OTg0MzA5MiAyIHRj"}
	for i := range 1000 {
		many.Threads = append(many.Threads, &receiptsv1.ThreadUnread{
			ChannelId: "channel-" + strconv.Itoa(i/100), RootSeq: int64(i%100 + 1), Head: &receiptsv1.Position{Seq: 2},
			Read: &receiptsv1.Position{}, PublicRead: &receiptsv1.Position{}, UnreadCount: 2, MentionCount: int64(i % 2),
			FirstUnreadSeq: 1, Following: true, LastActivityUnixMs: int64(1795869846095 - i),
		})
	}
	for name, resp := range map[string]*receiptsv1.ListThreadsResponse{
		"empty":            {},
		"user only":        {UserId: "nobody"},
		"one full thread":  {UserId: "u", Threads: []*receiptsv1.ThreadUnread{full}, NextPageToken: "YQ"},
		"zero values":      {UserId: "u", Threads: []*receiptsv1.ThreadUnread{{}, {ChannelId: "c", Head: &receiptsv1.Position{}}}},
		"negative, max":    {UserId: "u", Threads: []*receiptsv1.ThreadUnread{{RootSeq: -1, Read: &receiptsv1.Position{Epoch: -3, Seq: 1 << 62}, LastActivityUnixMs: -1}}},
		"escaped ids":      {UserId: `été"q\`, Threads: []*receiptsv1.ThreadUnread{{ChannelId: "\x01\b\f\n\r\t\x1f\"\\/<>&\u2028 日本 🙂"}}},
		"token only":       {NextPageToken: "MTc5NTg2OTg0MzA5MiAyIHRj"},
		"a thousand pages": many,
	} {
		w := httptest.NewRecorder()
		WriteListThreads(w, resp)
		want, err := protojson.Marshal(resp)
		require.NoError(t, err)
		require.JSONEq(t, string(want), w.Body.String(), name)
		require.Equal(t, "application/json", w.Header().Get("Content-Type"), name)
		require.Equal(t, strconv.Itoa(w.Body.Len()), w.Header().Get("Content-Length"), name)
		// Read back by protojson: the same message.
		var back receiptsv1.ListThreadsResponse
		require.NoError(t, protojson.Unmarshal(w.Body.Bytes(), &back), name)
		require.True(t, proto.Equal(resp, &back), name)
	}
}

func TestThreadsRoute(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/v1/users/u1/threads":          "u1",
		"/v1/users/%40a%3Ab/threads":    "@a:b",
		"/v1/users/a%2Fthreads/threads": "a/threads",
		"/v1/users/a%2Fthreads":         "",
		"/v1/users/a/b/threads":         "",
		"/v1/users//threads":            "",
		"/v1/users/a%/threads":          "",
		"/v1/users/u1/unread":           "",
		"/v1/users/u1/threads/x":        "",
	} {
		u, ok := ThreadsRoute(path)
		if !ok {
			u = ""
		}
		require.Equal(t, want, u, path)
	}
}

func TestThreadsQuery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw            string
		channel, token string
		limit          int32
		ok             bool
	}{
		{"", "", "", 0, true},
		{"limit=1000", "", "", 1000, true},
		{"limit=-1", "", "", -1, true},
		{"channel_id=c&limit=5&page_token=YQ", "c", "YQ", 5, true},
		{"channelId=%C3%A9t%C3%A9&pageToken=YQ", "été", "YQ", 0, true},
		{"channel_id=", "", "", 0, true},
		{"limit=x", "", "", 0, false},
		{"limit=", "", "", 0, false},
		{"limit=99999999999", "", "", 0, false},
		{"limit=1&limit=2", "", "", 0, false},
		{"channel_id=a&channelId=b", "", "", 0, false},
		{"page_token=a&pageToken=b", "", "", 0, false},
		{"page_size=5", "", "", 0, false},
		{"limit=%zz", "", "", 0, false},
	} {
		req, ok := ThreadsQuery(tc.raw)
		require.Equal(t, tc.ok, ok, tc.raw)
		if ok {
			require.Equal(t, tc.channel, req.GetChannelId(), tc.raw)
			require.Equal(t, tc.limit, req.GetLimit(), tc.raw)
			require.Equal(t, tc.token, req.GetPageToken(), tc.raw)
		}
	}
}
