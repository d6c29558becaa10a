package gate_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/gate/rest"
)

// The fast REST path and vanguard give the same answers (status, JSON,
// Retry-After) to the same requests, including errors and the bodies the
// fast reader leaves to vanguard. Each path has its own gate and Redis
// prefix, so both see the same state sequence.
func TestFastRESTAnswersAsVanguardDoes(t *testing.T) {
	t.Parallel()
	fast := setup(t, setupOpts{config: func(c *testConfig) { c.MaxBatchItems = 3 }})
	slow := setup(t, setupOpts{config: func(c *testConfig) { c.MaxBatchItems, c.Server.TranscodeAllREST = 3, true }})

	mark := "/v1/receipts:mark"
	cases := []struct {
		name, path, body string
		fast             bool // the fast reader takes it (else vanguard answers both)
	}{
		{"batch", mark, `{"receipts":[{"user_id":"u1","channel_id":"c1","kind":"READ","seq":5,"message_id":"m5","device_id":"d"},{"userId":"u1","channelId":"c2","kind":2,"seq":"7"}]}`, true},
		{"batch again: no-ops", mark, `{"receipts":[{"user_id":"u1","channel_id":"c1","kind":"READ","seq":5,"message_id":"m5","device_id":"d"}]}`, true},
		{"batch older", mark, ` { "receipts" : [ { "user_id" : "u1" , "channel_id" : "c1" , "kind" : "DELIVERED" , "seq" : 3 } ] } `, true},
		{"private read", mark, `{"receipts":[{"user_id":"u2","channel_id":"c1","kind":"READ","seq":9,"private":true}]}`, true},
		{"explicit epoch", mark, `{"receipts":[{"user_id":"u3","channel_id":"c1","kind":"READ","seq":4,"epoch":"0"}]}`, true},
		{"stale epoch", mark, `{"receipts":[{"user_id":"u3","channel_id":"c1","kind":"READ","seq":8,"epoch":-2}]}`, true},
		{"single read", "/v1/users/u4/channels/c9/read", `{"seq":12,"message_id":"m12"}`, true},
		{"single delivered", "/v1/users/u4/channels/c9/delivered", `{"seq":"20","deviceId":"phone"}`, true},
		{"single read behind", "/v1/users/u4/channels/c9/read", `{"seq":11}`, true},
		{"bad seq", "/v1/users/u4/channels/c9/read", `{"seq":-5}`, true},
		{"matrix ids", mark, `{"receipts":[{"user_id":"@a:x.org","channel_id":"!r:x.org","kind":"READ","seq":3,"message_id":"$m:x","device_id":"d:1"}]}`, true},
		{"escaped path ids", "/v1/users/%40a%3Ax.org/channels/%21r%2F1%3Ax.org/read", `{"seq":4}`, true},
		{"bare ':' in path ids", "/v1/users/@a:x.org/channels/!r:x.org/delivered", `{"seq":5}`, true},
		{"brace in path id", "/v1/users/%40a%7B/channels/c/read", `{"seq":5}`, true},
		{"bad id", mark, `{"receipts":[{"user_id":"a b","channel_id":"c1","kind":"READ","seq":1}]}`, true},
		{"no receipts", mark, `{"receipts":[]}`, true},
		{"empty object", mark, `{}`, true},
		{"too many", mark, `{"receipts":[{"user_id":"u","channel_id":"c","kind":"READ","seq":1},{"user_id":"u","channel_id":"c","kind":"READ","seq":1},{"user_id":"u","channel_id":"c","kind":"READ","seq":1},{"user_id":"u","channel_id":"c","kind":"READ","seq":1}]}`, true},
		{"missing kind", mark, `{"receipts":[{"user_id":"u5","channel_id":"c1","seq":1}]}`, true},
		{"private delivered", mark, `{"receipts":[{"user_id":"u5","channel_id":"c1","kind":"DELIVERED","seq":1,"private":true}]}`, true},
		// Left to vanguard.
		{"unknown kind name", mark, `{"receipts":[{"user_id":"u5","channel_id":"c1","kind":"SEEN","seq":1}]}`, false},
		{"unknown field", mark, `{"receipts":[{"user_id":"u6","channel_id":"c1","kind":"READ","seq":1,"color":"red"}]}`, false},
		{"escaped string", mark, `{"receipts":[{"user_id":"u\u0037","channel_id":"c1","kind":"READ","seq":1}]}`, false},
		{"repeated field", mark, `{"receipts":[{"user_id":"u8","userId":"u9","channel_id":"c1","kind":"READ","seq":1}]}`, false},
		{"null", mark, `{"receipts":null}`, false},
		{"fraction", "/v1/users/u4/channels/c9/read", `{"seq":1.5}`, false},
		{"exponent", "/v1/users/u4/channels/c9/read", `{"seq":2e1}`, false},
		{"malformed", mark, `{"receipts":[`, false},
		{"trailing garbage", mark, `{"receipts":[]}x`, false},
		{"user in body", "/v1/users/u4/channels/c9/read", `{"user_id":"x","seq":30}`, false},
		{"seq overflow", "/v1/users/u4/channels/c9/read", `{"seq":99999999999999999999}`, false},
	}
	for _, c := range cases {
		if c.path == mark {
			_, _, ok := rest.DecodeMarkReceipts([]byte(c.body), 0)
			require.Equal(t, c.fast, ok, "%s: fast reader's decision", c.name)
		} else {
			_, ok := rest.DecodeMark([]byte(c.body))
			require.Equal(t, c.fast, ok, "%s: fast reader's decision", c.name)
		}
		fr, fb := fast.doResp(t, http.MethodPost, c.path, c.body)
		sr, sb := slow.doResp(t, http.MethodPost, c.path, c.body)
		require.Equal(t, sr.StatusCode, fr.StatusCode, "%s: status; vanguard %s, fast %s", c.name, sb, fb)
		require.Equal(t, sr.Header.Get("Retry-After"), fr.Header.Get("Retry-After"), c.name)
		require.Equal(t, normalizedJSON(t, sb), normalizedJSON(t, fb), "%s: answer", c.name)
	}
}

// normalizedJSON parses an answer and drops the wall-clock fields, which
// differ between two gates.
func normalizedJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v), "body: %s", b)
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "updatedAtUnixMs")
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return v
}

// GET …/unread on the fast path answers as vanguard does: a user in a few
// channels (joined, read, unread, mentioned, private read), an unknown
// user, a bad id, and a query (left to vanguard).
func TestFastUnreadAnswersAsVanguardDoes(t *testing.T) {
	t.Parallel()
	fast := setup(t, setupOpts{})
	slow := setup(t, setupOpts{config: func(c *testConfig) { c.Server.TranscodeAllREST = true }})
	for _, tb := range []*testBundle{fast, slow} {
		for _, step := range []struct{ method, path, body string }{
			{http.MethodPut, "/v1/channels/c1/members/u1", `{}`},
			{http.MethodPut, "/v1/channels/c2/members/u1", `{}`},
			{http.MethodPost, "/v1/channels/c1/messages", `{"seq": 7, "message_id": "m7", "sender_id": "s", "mentions": ["u1"]}`},
			{http.MethodPost, "/v1/channels/c2/messages", `{"seq": 3, "message_id": "m3", "sender_id": "s"}`},
			{http.MethodPost, "/v1/users/u1/channels/c2/read", `{"seq": 3}`},
			{http.MethodPost, "/v1/users/u1/channels/c1/read", `{"seq": 2, "private": true}`},
		} {
			status, body := tb.do(t, step.method, step.path, step.body)
			require.Equal(t, http.StatusOK, status, "%s %s: %s", step.method, step.path, body)
		}
	}
	for _, path := range []string{"/v1/users/u1/unread", "/v1/users/nobody/unread", "/v1/users/a%20b/unread", "/v1/users/u1/unread?channel_id=c1",
		"/v1/users/u1/unread?page_size=1", "/v1/users/u1/unread?pageSize=1&page_token=YzE", "/v1/users/u1/unread?page_size=x",
		"/v1/users/u1/unread?page_size=0&page_token=%21",
		"/v1/users/%40a%3Ab/unread", "/v1/users/@a:b/unread", "/v1/users/a%2Fb/unread", "/v1/users/a%7Bb/unread"} {
		fr, fb := fast.doResp(t, http.MethodGet, path, "")
		sr, sb := slow.doResp(t, http.MethodGet, path, "")
		require.Equal(t, sr.StatusCode, fr.StatusCode, "%s: status; vanguard %s, fast %s", path, sb, fb)
		require.Equal(t, normalizedJSON(t, sb), normalizedJSON(t, fb), "%s: answer", path)
	}
	_, ok := rest.UnreadRoute("/v1/users/u1/unread")
	require.True(t, ok)
	u, ok := rest.UnreadRoute("/v1/users/a%2Fb/unread")
	require.True(t, ok)
	require.Equal(t, "a/b", u, "the route gets the escaped path: an id's '/' does not split it")
	for _, p := range []string{"/v1/users//unread", "/v1/users/a/b/unread", "/v1/users/a%zz/unread", "/v1/users/u1/read"} {
		_, ok := rest.UnreadRoute(p)
		require.False(t, ok, p)
	}
}
