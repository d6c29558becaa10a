package rest

import (
	"net/http"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// InboxRoute matches /v1/users/{user_id}/inbox; path is the escaped path,
// as SingleMarkRoute's.
func InboxRoute(path string) (user string, ok bool) { return userRoute(path, "/inbox") }

// InboxQuery reads the query of a GetInbox call: limit (an int32) and
// page_token, each at most once, in either spelling; anything else is not
// ok (vanguard answers it, errors included).
func InboxQuery(raw string) (req *receiptsv1.GetInboxRequest, ok bool) {
	req = &receiptsv1.GetInboxRequest{}
	return req, pageQuery(raw, &req.Limit, &req.PageToken, nil)
}

// WriteGetInbox writes a GetInbox answer as protojson does: the sidebar
// a client asks for at login, where protojson's reflection cost as much
// as a Redis round trip.
func WriteGetInbox(w http.ResponseWriter, resp *receiptsv1.GetInboxResponse) {
	writeAnswer(w, func(b *jsonBuf) {
		b.grow(64 + 300*len(resp.GetLines()))
		o := object{b: b}
		o.open()
		o.string("userId", resp.GetUserId())
		if ls := resp.GetLines(); len(ls) > 0 {
			o.field("lines")
			b.ch('[')
			for i, l := range ls {
				if i > 0 {
					b.ch(',')
				}
				lo := object{b: b}
				lo.open()
				if c := l.GetChannel(); c != nil {
					lo.field("channel")
					appendChannelUnread(b, c)
				}
				lo.int64("lastActivityUnixMs", l.GetLastActivityUnixMs())
				lo.string("firstUnreadMessageId", l.GetFirstUnreadMessageId())
				if t := l.GetThread(); t != nil {
					lo.field("thread")
					appendThreadUnread(b, t)
				}
				b.ch('}')
			}
			b.ch(']')
		}
		o.string("nextPageToken", resp.GetNextPageToken())
		b.ch('}')
	})
}
