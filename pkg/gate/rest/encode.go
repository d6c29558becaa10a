package rest

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// Routes of the fast path.
const (
	// MarkPath is the route of MarkReceipts.
	MarkPath         = "/v1/receipts:mark"
	restUsersPrefix  = "/v1/users/"
	restChannelsPart = "/channels/"
)

var bufPool = sync.Pool{New: func() any { return new(jsonBuf) }}

// jsonBuf is an answer being written. Its methods are appends the
// compiler inlines: bytes.Buffer's calls, one a byte, were a third of
// encoding a big unread answer.
type jsonBuf struct{ b []byte }

func (j *jsonBuf) ch(c byte)    { j.b = append(j.b, c) }
func (j *jsonBuf) str(s string) { j.b = append(j.b, s...) }
func (j *jsonBuf) raw(p []byte) { j.b = append(j.b, p...) }
func (j *jsonBuf) reset()       { j.b = j.b[:0] }
func (j *jsonBuf) grow(n int)   { j.b = slices.Grow(j.b, n) }

// SingleMarkRoute matches /v1/users/{user_id}/channels/{channel_id}/read
// (or /delivered). path is the escaped path (url.URL.EscapedPath): the
// ids are its segments, each percent-decoded once, so an id may hold any
// character ('/' sent as "%2F"); a malformed escape does not match.
func SingleMarkRoute(path string) (user, channel string, kind receiptsv1.Kind, ok bool) {
	rest, found := strings.CutPrefix(path, restUsersPrefix)
	if !found {
		return "", "", 0, false
	}
	user, rest, found = strings.Cut(rest, "/")
	if !found || user == "" || !strings.HasPrefix("/"+rest, restChannelsPart) {
		return "", "", 0, false
	}
	rest = rest[len(restChannelsPart)-1:]
	channel, verb, found := strings.Cut(rest, "/")
	if !found || channel == "" {
		return "", "", 0, false
	}
	switch verb {
	case "read":
		kind = receiptsv1.Kind_READ
	case "delivered":
		kind = receiptsv1.Kind_DELIVERED
	default:
		return "", "", 0, false
	}
	user, uok := pathSegment(user)
	channel, cok := pathSegment(channel)
	if !uok || !cok {
		return "", "", 0, false
	}
	return user, channel, kind, true
}

// pathSegment percent-decodes one escaped path segment, as vanguard
// decodes a path variable.
func pathSegment(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	v, err := url.PathUnescape(s)
	return v, err == nil
}

// WriteMarkReceipts writes a MarkReceipts answer as protojson does.
func WriteMarkReceipts(w http.ResponseWriter, resp *receiptsv1.MarkReceiptsResponse) {
	writeAnswer(w, func(b *jsonBuf) {
		b.str(`{"results":[`)
		for i, res := range resp.GetResults() {
			if i > 0 {
				b.ch(',')
			}
			appendResult(b, res)
		}
		b.str(`]}`)
	})
}

// WriteMark writes a MarkRead or MarkDelivered answer as protojson does.
func WriteMark(w http.ResponseWriter, resp *receiptsv1.MarkResponse) {
	writeAnswer(w, func(b *jsonBuf) {
		b.ch('{')
		if res := resp.GetResult(); res != nil {
			b.str(`"result":`)
			appendResult(b, res)
		}
		b.ch('}')
	})
}

func writeAnswer(w http.ResponseWriter, encode func(*jsonBuf)) {
	b := bufPool.Get().(*jsonBuf)
	b.reset()
	encode(b)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b.b))}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.b)
	putBuf(b)
}

// putBuf keeps b for another answer, up to a whole unread page of 10,000
// channels (about 1.7 MB): allocating and zeroing one anew was a few
// percent of such a call. A bigger one is not kept.
func putBuf(b *jsonBuf) {
	if cap(b.b) <= 4<<20 {
		bufPool.Put(b)
	}
}

// appendResult writes a ReceiptResult as protojson does (zero values left
// out).
func appendResult(b *jsonBuf, res *receiptsv1.ReceiptResult) {
	b.ch('{')
	obj := object{b: b}
	field := obj.field
	if st := res.GetState(); st != nil {
		field("state")
		appendChannelState(b, st)
	}
	if res.GetAdvanced() {
		field("advanced")
		b.str("true")
	}
	if d := res.GetDurability(); d != 0 {
		field("durability")
		b.ch('"')
		b.str(d.String())
		b.ch('"')
	}
	if res.GetRealtimeDegraded() {
		field("realtimeDegraded")
		b.str("true")
	}
	if v := res.GetReason(); v != "" {
		field("reason")
		appendJSONString(b, v)
	}
	b.ch('}')
}

func appendChannelState(b *jsonBuf, st *receiptsv1.ChannelState) {
	b.ch('{')
	obj := object{b: b}
	field := obj.field
	if v := st.GetChannelId(); v != "" {
		field("channelId")
		appendJSONString(b, v)
	}
	if c := st.GetRead(); c != nil {
		field("read")
		appendCursor(b, c)
	}
	if c := st.GetDelivered(); c != nil {
		field("delivered")
		appendCursor(b, c)
	}
	if v := st.GetDeviceId(); v != "" {
		field("deviceId")
		appendJSONString(b, v)
	}
	if v := st.GetUpdatedAtUnixMs(); v != 0 {
		field("updatedAtUnixMs")
		appendInt64(b, v)
	}
	if c := st.GetPrivateRead(); c != nil {
		field("privateRead")
		appendCursor(b, c)
	}
	b.ch('}')
}

func appendCursor(b *jsonBuf, c *receiptsv1.Cursor) {
	b.ch('{')
	if p := c.GetPosition(); p != nil {
		b.str(`"position":{`)
		if p.GetEpoch() != 0 {
			b.str(`"epoch":`)
			appendInt64(b, p.GetEpoch())
			if p.GetSeq() != 0 {
				b.ch(',')
			}
		}
		if p.GetSeq() != 0 {
			b.str(`"seq":`)
			appendInt64(b, p.GetSeq())
		}
		b.ch('}')
		if c.GetMessageId() != "" {
			b.ch(',')
		}
	}
	if v := c.GetMessageId(); v != "" {
		b.str(`"messageId":`)
		appendJSONString(b, v)
	}
	b.ch('}')
}

// appendInt64 writes an int64 as protojson does: a quoted decimal.
func appendInt64(b *jsonBuf, v int64) {
	b.ch('"')
	b.b = strconv.AppendInt(b.b, v, 10)
	b.ch('"')
}

// appendJSONString quotes s for JSON as protojson does (UTF-8 kept;
// quotes, backslashes and control characters escaped).
func appendJSONString(b *jsonBuf, s string) {
	const hex = "0123456789abcdef"
	b.ch('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.str(s[start:i])
		switch c {
		case '"', '\\':
			b.ch('\\')
			b.ch(c)
		case '\n':
			b.str(`\n`)
		case '\r':
			b.str(`\r`)
		case '\t':
			b.str(`\t`)
		case '\b':
			b.str(`\b`)
		case '\f':
			b.str(`\f`)
		default:
			b.str(`\u00`)
			b.ch(hex[c>>4])
			b.ch(hex[c&0xf])
		}
		start = i + 1
	}
	b.str(s[start:])
	b.ch('"')
}

// UnreadRoute matches /v1/users/{user_id}/unread; path is the escaped
// path, as SingleMarkRoute's.
func UnreadRoute(path string) (user string, ok bool) { return userRoute(path, "/unread") }

// userRoute matches /v1/users/{user_id}<suffix> (a user's read route).
func userRoute(path, suffix string) (user string, ok bool) {
	rest, found := strings.CutPrefix(path, restUsersPrefix)
	if !found {
		return "", false
	}
	user, found = strings.CutSuffix(rest, suffix)
	if !found || user == "" || strings.ContainsRune(user, '/') {
		return "", false
	}
	return pathSegment(user)
}

// UnreadPageQuery reads the query of a default-set unread call: only
// page_size (an int32) and page_token, each at most once; anything else
// is not ok (vanguard answers it, errors included).
func UnreadPageQuery(raw string) (size int32, token string, ok bool) {
	if raw == "" {
		return 0, "", true
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return 0, "", false
	}
	var sizes, tokens int
	for k, v := range q {
		switch k {
		case "page_size", "pageSize":
			sizes += len(v)
			n, err := strconv.ParseInt(v[0], 10, 32)
			if err != nil {
				return 0, "", false
			}
			size = int32(n)
		case "page_token", "pageToken":
			tokens += len(v)
			token = v[0]
		default:
			return 0, "", false
		}
	}
	return size, token, sizes <= 1 && tokens <= 1
}

// WriteGetUnread writes a GetUnread answer as protojson does. A user's
// unread answer is the largest the API gives (a channel object each, up
// to the cap of channels): protojson's reflection spent more on it than
// the read itself.
func WriteGetUnread(w http.ResponseWriter, resp *receiptsv1.GetUnreadResponse) {
	writeAnswer(w, func(b *jsonBuf) {
		// About 170 bytes a channel: grown once, not doubled up to it.
		b.grow(200 * len(resp.GetChannels()))
		o := object{b: b}
		o.open()
		o.string("userId", resp.GetUserId())
		if chs := resp.GetChannels(); len(chs) > 0 {
			o.field("channels")
			b.ch('[')
			appendChannelsUnread(b, chs)
			b.ch(']')
		}
		o.int64("unreadTotal", resp.GetUnreadTotal())
		o.int64("channelsWithUnread", resp.GetChannelsWithUnread())
		o.int64("mentionTotal", resp.GetMentionTotal())
		o.bool("mentionsCapped", resp.GetMentionsCapped())
		o.string("nextPageToken", resp.GetNextPageToken())
		o.int64("unreadThreadsTotal", resp.GetUnreadThreadsTotal())
		b.ch('}')
	})
}

// object writes a JSON object's fields, protojson's way: zero values left
// out.
type object struct {
	b   *jsonBuf
	sep bool
}

func (o *object) open() { o.b.ch('{'); o.sep = false }

func (o *object) field(name string) {
	if o.sep {
		o.b.ch(',')
	}
	o.sep = true
	o.b.ch('"')
	o.b.str(name)
	o.b.str(`":`)
}

func (o *object) int64(name string, v int64) {
	if v != 0 {
		o.field(name)
		appendInt64(o.b, v)
	}
}

// string writes a string field; protojson omits an empty one.
func (o *object) string(name, v string) {
	if v != "" {
		o.field(name)
		appendJSONString(o.b, v)
	}
}

func (o *object) bool(name string, v bool) {
	if v {
		o.field(name)
		o.b.str("true")
	}
}

func (o *object) position(name string, p *receiptsv1.Position) {
	if p == nil {
		return
	}
	o.field(name)
	in := object{b: o.b}
	in.open()
	in.int64("epoch", p.GetEpoch())
	in.int64("seq", p.GetSeq())
	o.b.ch('}')
}

// halvesFrom is the size of an unread answer whose channels are encoded
// in two halves at once: encoding a page of 10,000 channels on one core
// was a sixth of its call, while Redis and the other core were idle.
const halvesFrom = 2000

// appendChannelsUnread writes chs, comma-separated.
func appendChannelsUnread(b *jsonBuf, chs []*receiptsv1.ChannelUnread) {
	each := func(b *jsonBuf, chs []*receiptsv1.ChannelUnread) {
		for i, c := range chs {
			if i > 0 {
				b.ch(',')
			}
			appendChannelUnread(b, c)
		}
	}
	if len(chs) < halvesFrom {
		each(b, chs)
		return
	}
	half := len(chs) / 2
	second := bufPool.Get().(*jsonBuf)
	second.reset()
	done := make(chan struct{})
	go func() {
		defer close(done)
		second.grow(200 * (len(chs) - half))
		each(second, chs[half:])
	}()
	each(b, chs[:half])
	<-done
	b.ch(',')
	b.raw(second.b)
	putBuf(second)
}

func appendChannelUnread(b *jsonBuf, c *receiptsv1.ChannelUnread) {
	o := object{b: b}
	o.open()
	o.string("channelId", c.GetChannelId())
	o.position("head", c.GetHead())
	o.position("read", c.GetRead())
	o.position("publicRead", c.GetPublicRead())
	o.int64("unreadCount", c.GetUnreadCount())
	o.int64("mentionCount", c.GetMentionCount())
	o.bool("mentionsCapped", c.GetMentionsCapped())
	o.int64("firstUnreadSeq", c.GetFirstUnreadSeq())
	o.bool("member", c.GetMember())
	o.int64("unreadThreads", c.GetUnreadThreads())
	o.int64("threadMentionCount", c.GetThreadMentionCount())
	o.string("level", c.GetLevel())
	o.bool("muted", c.GetMuted())
	o.int64("mutedUntilUnixMs", c.GetMutedUntilUnixMs())
	b.ch('}')
}
