package rest

import (
	"net/http"
	"net/url"
	"strconv"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// ThreadsRoute matches /v1/users/{user_id}/threads; path is the escaped
// path, as SingleMarkRoute's.
func ThreadsRoute(path string) (user string, ok bool) { return userRoute(path, "/threads") }

// ThreadsQuery reads the query of a ListThreads call: channel_id, limit
// (an int32) and page_token, each at most once, in either spelling;
// anything else is not ok (vanguard answers it, errors included).
func ThreadsQuery(raw string) (req *receiptsv1.ListThreadsRequest, ok bool) {
	req = &receiptsv1.ListThreadsRequest{}
	ok = pageQuery(raw, &req.Limit, &req.PageToken, func(k, v string) bool {
		if k != "channel_id" && k != "channelId" {
			return false
		}
		req.ChannelId = v
		return true
	}, "channel_id", "channelId")
	return req, ok
}

// pageQuery reads a paged list's query: limit (an int32) and page_token,
// and the fields other takes, each at most once, in either spelling
// (spellings: the pairs of names of one field beyond page_token);
// anything else is not ok (vanguard answers it, errors included).
func pageQuery(raw string, limit *int32, token *string, other func(k, v string) bool, spellings ...string) bool {
	if raw == "" {
		return true
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return false
	}
	for k, v := range q {
		if len(v) != 1 {
			return false
		}
		switch k {
		case "limit":
			n, err := strconv.ParseInt(v[0], 10, 32)
			if err != nil {
				return false
			}
			*limit = int32(n)
		case "page_token", "pageToken":
			*token = v[0]
		default:
			if other == nil || !other(k, v[0]) {
				return false
			}
		}
	}
	// Both spellings of one field: vanguard decides which wins.
	spellings = append(spellings, "page_token", "pageToken")
	for i := 0; i+1 < len(spellings); i += 2 {
		if len(q[spellings[i]])+len(q[spellings[i+1]]) > 1 {
			return false
		}
	}
	return true
}

// WriteListThreads writes a ListThreads answer as protojson does: a page
// of up to 1,000 threads, where protojson's reflection cost more than the
// reads behind it.
func WriteListThreads(w http.ResponseWriter, resp *receiptsv1.ListThreadsResponse) {
	ts := resp.GetThreads()
	// About 250 bytes a thread.
	writeUserPage(w, resp.GetUserId(), "threads", len(ts), 280, resp.GetNextPageToken(), func(b *jsonBuf, i int) {
		appendThreadUnread(b, ts[i])
	})
}

// writeUserPage writes a page of a user's list as protojson does:
// {"userId", field: [n items, each by item], "nextPageToken"}, the buffer
// grown once for about size bytes an item, not doubled up to it.
func writeUserPage(w http.ResponseWriter, user, field string, n, size int, token string, item func(b *jsonBuf, i int)) {
	writeAnswer(w, func(b *jsonBuf) {
		b.grow(64 + size*n)
		o := object{b: b}
		o.open()
		o.string("userId", user)
		if n > 0 {
			o.field(field)
			b.ch('[')
			for i := range n {
				if i > 0 {
					b.ch(',')
				}
				item(b, i)
			}
			b.ch(']')
		}
		o.string("nextPageToken", token)
		b.ch('}')
	})
}

func appendThreadUnread(b *jsonBuf, t *receiptsv1.ThreadUnread) {
	o := object{b: b}
	o.open()
	o.string("channelId", t.GetChannelId())
	o.int64("rootSeq", t.GetRootSeq())
	o.position("head", t.GetHead())
	o.position("read", t.GetRead())
	o.position("publicRead", t.GetPublicRead())
	o.int64("unreadCount", t.GetUnreadCount())
	o.int64("mentionCount", t.GetMentionCount())
	o.bool("mentionsCapped", t.GetMentionsCapped())
	o.int64("firstUnreadSeq", t.GetFirstUnreadSeq())
	o.bool("following", t.GetFollowing())
	o.int64("lastActivityUnixMs", t.GetLastActivityUnixMs())
	b.ch('}')
}
