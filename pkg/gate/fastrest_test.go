package gate_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

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
		requireSameGET(t, fast, slow, path)
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

// GET …/threads on the fast path answers as vanguard does: a user
// following threads in a few channels (read, unread, mentioned, one left
// by leaving the channel), ids that need escaping, paging with the token
// an answer gave, a channel filter in both spellings, errors, and the
// queries left to vanguard. Both gates share one stepped clock, so the
// activity times and the page tokens are the same.
func TestFastThreadsAnswersAsVanguardDoes(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	fast := setup(t, setupOpts{config: func(c *testConfig) { c.Clock = clock }})
	slow := setup(t, setupOpts{config: func(c *testConfig) { c.Clock, c.Server.TranscodeAllREST = clock, true }})
	// After the set-ups: a follow's version is this clock and a join's
	// Redis' (a follow that predates the join does not count), so the clock
	// must not start behind Redis' by a slow set-up.
	now.Store(time.Now().UnixMilli())
	const (
		odd     = `/v1/channels/%C3%A9t%C3%A9%22q%5C` // été"q\
		oddUser = `/v1/users/%40a%3Ax.org`            // @a:x.org
		left    = `/v1/channels/gone`
	)
	steps := []struct{ method, path, body string }{
		{http.MethodPut, "/v1/channels/tc/members/u1", `{}`},
		{http.MethodPut, "/v1/channels/tc/members/u2", `{}`},
		{http.MethodPut, odd + "/members/u1", `{}`},
		{http.MethodPut, odd + "/members/%40a%3Ax.org", `{}`},
		{http.MethodPut, left + "/members/u1", `{}`},
		{http.MethodPost, "/v1/channels/tc/messages", `{"seq": 9, "message_id": "m9", "sender_id": "u2"}`},
		{http.MethodPost, odd + "/messages", `{"seq": 4, "sender_id": "u1"}`},
		{http.MethodPost, left + "/messages", `{"seq": 2, "sender_id": "u2"}`},
	}
	for root := 1; root <= 5; root++ {
		steps = append(steps, struct{ method, path, body string }{http.MethodPost, fmt.Sprintf("/v1/channels/tc/threads/%d/messages", root),
			fmt.Sprintf(`{"seq": 1, "message_id": "r%d", "sender_id": "u2", "mentions": ["u1"]}`, root)})
	}
	steps = append(steps, []struct{ method, path, body string }{
		{http.MethodPost, "/v1/channels/tc/threads/2/messages", `{"seq": 2, "sender_id": "u2"}`},
		{http.MethodPost, "/v1/channels/tc/threads/2/messages", `{"seq": 3, "sender_id": "u2", "mentions": ["u1"]}`},
		{http.MethodPost, "/v1/users/u1/channels/tc/threads/2/read", `{"seq": 2}`},
		{http.MethodPost, "/v1/users/u1/channels/tc/threads/3/read", `{"seq": 1, "private": true}`},
		{http.MethodPost, odd + "/threads/3/messages", `{"seq": 1, "sender_id": "u1", "mentions": ["@a:x.org"]}`},
		{http.MethodPost, left + "/threads/1/messages", `{"seq": 1, "sender_id": "u2", "mentions": ["u1"]}`},
		{http.MethodDelete, left + "/members/u1", ``},
	}...)
	for i, step := range steps {
		now.Add(int64(1000 + i%3)) // ties of activity too: ordered by thread
		for _, tb := range []*testBundle{fast, slow} {
			status, body := tb.do(t, step.method, step.path, step.body)
			require.Equal(t, http.StatusOK, status, "%s %s: %s", step.method, step.path, body)
		}
	}
	var first struct {
		NextPageToken string `json:"nextPageToken"`
	}
	_, body := fast.doResp(t, http.MethodGet, "/v1/users/u1/threads?limit=2", "")
	require.NoError(t, json.Unmarshal(body, &first))
	require.NotEmpty(t, first.NextPageToken, "a second page: %s", body)
	paths := []struct {
		path string
		fast bool // the fast path takes it (else vanguard answers both)
	}{
		{"/v1/users/u1/threads", true},
		{"/v1/users/u1/threads?limit=1000", true},
		{"/v1/users/u1/threads?limit=2", true},
		{"/v1/users/u1/threads?limit=2&page_token=" + first.NextPageToken, true},
		{"/v1/users/u1/threads?pageToken=" + first.NextPageToken + "&limit=0", true},
		{"/v1/users/u1/threads?channel_id=tc&limit=3", true},
		{"/v1/users/u1/threads?channelId=%C3%A9t%C3%A9%22q%5C", true},
		{"/v1/users/u1/threads?channel_id=gone", true},
		{"/v1/users/u2/threads", true},
		{"/v1/users/nobody/threads", true},
		{oddUser + "/threads", true},
		{"/v1/users/@a:x.org/threads", true},
		{"/v1/users/a%20b/threads", true},
		{"/v1/users/u1/threads?limit=5000", true},
		{"/v1/users/u1/threads?limit=-1", true},
		{"/v1/users/u1/threads?page_token=nope", true},
		{"/v1/users/u1/threads?channel_id=a%7Bb", true},
		// Left to vanguard.
		{"/v1/users/u1/threads?limit=x", false},
		{"/v1/users/u1/threads?limit=1&limit=2", false},
		{"/v1/users/u1/threads?channel_id=tc&channelId=tc", false},
		{"/v1/users/u1/threads?color=red", false},
		{"/v1/users/u1/threads?limit=%zz", false},
	}
	for _, c := range paths {
		u, err := url.Parse(c.path)
		require.NoError(t, err)
		_, routed := rest.ThreadsRoute(u.EscapedPath())
		_, queried := rest.ThreadsQuery(u.RawQuery)
		require.Equal(t, c.fast, routed && queried, "%s: fast path's decision", c.path)
		requireSameGET(t, fast, slow, c.path)
	}
}

// GET …/inbox on the fast path answers as vanguard does: channel and
// thread lines, paging with the token an answer gave, both spellings,
// errors, and the queries left to vanguard.
func TestFastInboxAnswersAsVanguardDoes(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	fast := setup(t, setupOpts{config: func(c *testConfig) { c.Clock = clock }})
	slow := setup(t, setupOpts{config: func(c *testConfig) { c.Clock, c.Server.TranscodeAllREST = clock, true }})
	now.Store(time.Now().UnixMilli())               // after the joins, which Redis' clock versions
	const odd = `/v1/channels/%C3%A9t%C3%A9%22q%5C` // été"q\
	steps := []struct{ method, path, body string }{
		{http.MethodPut, "/v1/channels/a/members/u1", `{}`},
		{http.MethodPut, "/v1/channels/b/members/u1", `{}`},
		{http.MethodPut, odd + "/members/u1", `{}`},
		{http.MethodPost, "/v1/channels/a/messages", `{"seq": 3, "message_id": "a3", "sender_id": "u2"}`},
		{http.MethodPost, odd + "/messages", `{"seq": 2, "message_id": "x\"2", "sender_id": "u2", "mentions": ["u1"]}`},
		{http.MethodPost, "/v1/channels/b/messages", `{"seq": 1, "sender_id": "u1"}`},
		{http.MethodPut, "/v1/users/u1/channels/a/threads/1/follow", `{}`},
		{http.MethodPost, "/v1/channels/a/threads/1/messages", `{"seq": 1, "message_id": "r1", "sender_id": "u2"}`},
		{http.MethodPut, "/v1/users/u1/channels/a/notifications", `{"level": "mentions"}`},
	}
	for _, step := range steps {
		now.Add(1000)
		for _, tb := range []*testBundle{fast, slow} {
			tb.ok(t, step.method, step.path, step.body)
		}
	}
	var first struct {
		NextPageToken string `json:"nextPageToken"`
	}
	require.NoError(t, json.Unmarshal(fast.ok(t, http.MethodGet, "/v1/users/u1/inbox?limit=1", ""), &first))
	require.NotEmpty(t, first.NextPageToken)
	require.Contains(t, string(fast.ok(t, http.MethodGet, "/v1/users/u1/inbox", "")), `"thread":{`, "a thread line among the channels")
	for _, c := range []struct {
		path string
		fast bool
	}{
		{"/v1/users/u1/inbox", true},
		{"/v1/users/u1/inbox?limit=1", true},
		{"/v1/users/u1/inbox?limit=2&page_token=" + first.NextPageToken, true},
		{"/v1/users/u1/inbox?pageToken=" + first.NextPageToken, true},
		{"/v1/users/nobody/inbox", true},
		{"/v1/users/u1/inbox?limit=500", true},
		{"/v1/users/u1/inbox?page_token=nope", true},
		{"/v1/users/a%7Bb/inbox", true},
		// Left to vanguard.
		{"/v1/users/u1/inbox?limit=x", false},
		{"/v1/users/u1/inbox?color=red", false},
	} {
		u, err := url.Parse(c.path)
		require.NoError(t, err)
		_, routed := rest.InboxRoute(u.EscapedPath())
		_, queried := rest.InboxQuery(u.RawQuery)
		require.Equal(t, c.fast, routed && queried, "%s: fast path's decision", c.path)
		requireSameGET(t, fast, slow, c.path)
	}
}

// requireSameGET requires the fast path's gate and vanguard's to answer a
// GET of path alike: the status and the JSON.
func requireSameGET(t *testing.T, fast, slow *testBundle, path string) {
	t.Helper()
	fr, fb := fast.doResp(t, http.MethodGet, path, "")
	sr, sb := slow.doResp(t, http.MethodGet, path, "")
	require.Equal(t, sr.StatusCode, fr.StatusCode, "%s: status; vanguard %s, fast %s", path, sb, fb)
	require.Equal(t, normalizedJSON(t, sb), normalizedJSON(t, fb), "%s: answer", path)
}
