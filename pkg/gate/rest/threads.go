package rest

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// ThreadsRoute matches /v1/users/{user_id}/threads; path is the escaped
// path, as SingleMarkRoute's.
func ThreadsRoute(path string) (user string, ok bool) {
	rest, found := strings.CutPrefix(path, restUsersPrefix)
	if !found {
		return "", false
	}
	user, found = strings.CutSuffix(rest, "/threads")
	if !found || user == "" || strings.ContainsRune(user, '/') {
		return "", false
	}
	return pathSegment(user)
}

// ThreadsQuery reads the query of a ListThreads call: channel_id, limit
// (an int32) and page_token, each at most once, in either spelling;
// anything else is not ok (vanguard answers it, errors included).
func ThreadsQuery(raw string) (req *receiptsv1.ListThreadsRequest, ok bool) {
	req = &receiptsv1.ListThreadsRequest{}
	if raw == "" {
		return req, true
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, false
	}
	for k, v := range q {
		if len(v) != 1 {
			return nil, false
		}
		switch k {
		case "channel_id", "channelId":
			req.ChannelId = v[0]
		case "limit":
			n, err := strconv.ParseInt(v[0], 10, 32)
			if err != nil {
				return nil, false
			}
			req.Limit = int32(n)
		case "page_token", "pageToken":
			req.PageToken = v[0]
		default:
			return nil, false
		}
	}
	// Both spellings of one field: vanguard decides which wins.
	if len(q["channel_id"])+len(q["channelId"]) > 1 || len(q["page_token"])+len(q["pageToken"]) > 1 {
		return nil, false
	}
	return req, true
}

// WriteListThreads writes a ListThreads answer as protojson does: a page
// of up to 1,000 threads, where protojson's reflection cost more than the
// reads behind it.
func WriteListThreads(w http.ResponseWriter, resp *receiptsv1.ListThreadsResponse) {
	writeAnswer(w, func(b *bytes.Buffer) {
		// About 250 bytes a thread: grown once, not doubled up to it.
		b.Grow(64 + 280*len(resp.GetThreads()))
		o := object{b: b}
		o.open()
		o.string("userId", resp.GetUserId())
		if ts := resp.GetThreads(); len(ts) > 0 {
			o.field("threads")
			b.WriteByte('[')
			for i, t := range ts {
				if i > 0 {
					b.WriteByte(',')
				}
				appendThreadUnread(b, t)
			}
			b.WriteByte(']')
		}
		o.string("nextPageToken", resp.GetNextPageToken())
		b.WriteByte('}')
	})
}

func appendThreadUnread(b *bytes.Buffer, t *receiptsv1.ThreadUnread) {
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
	b.WriteByte('}')
}
