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
	ls := resp.GetLines()
	writeUserPage(w, resp.GetUserId(), "lines", len(ls), 300, resp.GetNextPageToken(), func(b *jsonBuf, i int) {
		l := ls[i]
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
	})
}
