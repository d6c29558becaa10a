package rest

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

func TestSingleMarkRoute(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/v1/users/u1/channels/c1/read":                                        "u1 c1 READ",
		"/v1/users/u1/channels/c1/delivered":                                   "u1 c1 DELIVERED",
		"/v1/users/u1/channels/c1/unread":                                      "",
		"/v1/users/u%201/channels/c1/read":                                     "u 1 c1 READ",
		"/v1/users/%40alice%3Aexample.org/channels/%21room%3Aexample.org/read": "@alice:example.org !room:example.org READ",
		"/v1/users/@a:b/channels/!r:b/delivered":                               "@a:b !r:b DELIVERED",
		"/v1/users/a%2Fb/channels/c%2Fread/read":                               "a/b c/read READ",
		"/v1/users/50%25/channels/c%253A/read":                                 "50% c%3A READ",
		"/v1/users/a%zz/channels/c/read":                                       "",
		"/v1/users/a/b/channels/c/read":                                        "",
		"/v1/users/a/channels/b/c/read":                                        "",
		"/v1/users//channels/c1/read":                                          "",
		"/v1/users/u1/channels//read":                                          "",
		"/v1/users/u1/chans/c1/read":                                           "",
		"/v1/users/u1/channels/c1/read/x":                                      "",
	} {
		u, c, k, ok := SingleMarkRoute(path)
		got := ""
		if ok {
			got = strings.Join([]string{u, c, k.String()}, " ")
		}
		require.Equal(t, want, got, path)
	}
}

func TestUnreadRoute(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/v1/users/u1/unread":           "u1",
		"/v1/users/%40a%3Ab/unread":     "@a:b",
		"/v1/users/a%2Funread/unread":   "a/unread",
		"/v1/users/a%2Funread":          "",
		"/v1/users/a/b/unread":          "",
		"/v1/users//unread":             "",
		"/v1/users/a%/unread":           "",
		"/v1/users/u1/channels/c1/read": "",
	} {
		u, ok := UnreadRoute(path)
		if !ok {
			u = ""
		}
		require.Equal(t, want, u, path)
	}
}

// Not parallel: AllocsPerRun.
func TestDecodeMarkReceiptsCountsPastTheLimit(t *testing.T) {
	body := func(n int) []byte {
		items := make([]string, n)
		for i := range items {
			items[i] = `{"user_id":"user-` + strings.Repeat("x", 20) + `","channel_id":"c","kind":"READ","seq":1}`
		}
		return []byte(`{"receipts":[` + strings.Join(items, ",") + `]}`)
	}
	req, n, ok := DecodeMarkReceipts(body(5), 2)
	require.True(t, ok)
	require.Equal(t, 5, n, "every item is counted")
	require.Len(t, req.GetReceipts(), 2, "only the items within the limit are kept")
	require.Equal(t, "user-"+strings.Repeat("x", 20), req.GetReceipts()[1].GetUserId())

	// A malformed item past the limit still falls back (the syntax is
	// checked to the end).
	bad := append(body(3)[:len(body(3))-2], []byte(`,{"seq":}]}`)...)
	_, _, ok = DecodeMarkReceipts(bad, 2)
	require.False(t, ok)

	// Memory is the limit's, not the body's: 10,000 items past a limit of
	// 10 allocate no more than 10 items do.
	within, over := body(10), body(10_000)
	allocWithin := testing.AllocsPerRun(20, func() { _, _, _ = DecodeMarkReceipts(within, 10) })
	allocOver := testing.AllocsPerRun(20, func() { _, _, _ = DecodeMarkReceipts(over, 10) })
	require.LessOrEqual(t, allocOver, allocWithin+2, "allocations: %v within the limit, %v for 10,000 items", allocWithin, allocOver)
	_, n, ok = DecodeMarkReceipts(over, 0)
	require.True(t, ok)
	require.Equal(t, 10_000, n, "no limit: everything kept")
}

// The fast GetUnread writer answers as protojson does, the page token
// included.
func TestWriteGetUnreadAsProtojson(t *testing.T) {
	resp := &receiptsv1.GetUnreadResponse{
		UserId: "u",
		Channels: []*receiptsv1.ChannelUnread{{
			ChannelId: "c", Head: &receiptsv1.Position{Seq: 9}, Read: &receiptsv1.Position{Epoch: 1, Seq: 2},
			PublicRead: &receiptsv1.Position{Seq: 2}, UnreadCount: 7, MentionCount: 1, FirstUnreadSeq: 3, Member: true,
			Level: "mentions", Muted: true, MutedUntilUnixMs: 5,
		}},
		UnreadTotal: 7, ChannelsWithUnread: 1, MentionTotal: 1, NextPageToken: "Yw",
	}
	w := httptest.NewRecorder()
	WriteGetUnread(w, resp)
	want, err := protojson.Marshal(resp)
	require.NoError(t, err)
	require.JSONEq(t, string(want), w.Body.String())
}

// A big answer, its channels encoded in two halves at once, answers as
// protojson does too, in order (an odd count: halves of unequal size).
func TestWriteGetUnreadHalvesAsProtojson(t *testing.T) {
	t.Parallel()
	for _, n := range []int{halvesFrom - 1, halvesFrom, 2*halvesFrom + 1} {
		resp := &receiptsv1.GetUnreadResponse{UserId: "u", UnreadTotal: int64(n)}
		for i := range n {
			resp.Channels = append(resp.Channels, &receiptsv1.ChannelUnread{
				ChannelId: "c" + strconv.Itoa(i), Head: &receiptsv1.Position{Seq: int64(i + 1)},
				Read: &receiptsv1.Position{Epoch: int64(i % 3), Seq: int64(i)}, UnreadCount: 1, Member: i%2 == 0,
			})
		}
		w := httptest.NewRecorder()
		WriteGetUnread(w, resp)
		want, err := protojson.Marshal(resp)
		require.NoError(t, err)
		require.JSONEq(t, string(want), w.Body.String(), "%d channels", n)
	}
}

func TestUnreadPageQuery(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		size  int32
		token string
		ok    bool
	}{
		{"", 0, "", true},
		{"page_size=5", 5, "", true},
		{"pageSize=5&page_token=YQ", 5, "YQ", true},
		{"page_token=YQ&pageToken=Yg", 0, "", false},
		{"page_size=x", 0, "", false},
		{"page_size=99999999999", 0, "", false},
		{"channel_id=c", 0, "", false},
		{"page_size=%zz", 0, "", false},
	} {
		size, token, ok := UnreadPageQuery(tc.raw)
		require.Equal(t, tc.ok, ok, tc.raw)
		if ok {
			require.Equal(t, tc.size, size, tc.raw)
			require.Equal(t, tc.token, token, tc.raw)
		}
	}
}

// BenchmarkWriteGetUnread encodes the answer of a user in 1,000 channels,
// each with unread messages and a mention.
func BenchmarkWriteGetUnread(b *testing.B) {
	resp := &receiptsv1.GetUnreadResponse{UserId: "ubr-1000", UnreadTotal: 10000, ChannelsWithUnread: 1000, MentionTotal: 2000}
	for i := range 1000 {
		resp.Channels = append(resp.Channels, &receiptsv1.ChannelUnread{
			ChannelId: "ubr-1000-c" + strconv.Itoa(i), Head: &receiptsv1.Position{Seq: 10}, Read: &receiptsv1.Position{},
			PublicRead: &receiptsv1.Position{}, UnreadCount: 10, MentionCount: 2, FirstUnreadSeq: 1, Member: true, Level: "all",
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		WriteGetUnread(httptest.NewRecorder(), resp)
	}
}
