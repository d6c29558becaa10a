package gate

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Inbox page sizes.
const (
	InboxLimitDefault = 50
	MaxInboxLimit     = 200
)

// GetInbox implements receiptsv1connect.ReceiptServiceHandler. The order
// comes from the user's channel set and the heads alone (no counting):
// one read of the user's hashes and one MGET of the heads; the counts are
// GetUnread's, of the page's channels only.
func (g *Gate) GetInbox(ctx context.Context, req *connect.Request[receiptsv1.GetInboxRequest]) (*connect.Response[receiptsv1.GetInboxResponse], error) {
	user := req.Msg.GetUserId()
	if err := receipt.ValidateID("user_id", user); err != nil {
		return nil, invalid(apierr.InvalidID, err)
	}
	limit := int(req.Msg.GetLimit())
	switch {
	case limit == 0:
		limit = InboxLimitDefault
	case limit < 0 || limit > MaxInboxLimit:
		return nil, invalid(apierr.InvalidField, &receipt.FieldError{Field: "limit", Reason: fmt.Sprintf("must be within [1, %d], got %d", MaxInboxLimit, limit)})
	}
	after, hasAfter, err := decodeInboxToken(req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	heads, err := g.inboxOrder(ctx, user)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(heads, newestFirst)
	start := 0
	if hasAfter {
		start, _ = slices.BinarySearchFunc(heads, after, newestFirst)
		if start < len(heads) && newestFirst(heads[start], after) == 0 {
			start++
		}
	}
	page := heads[start:min(start+limit, len(heads))]
	out := &receiptsv1.GetInboxResponse{UserId: user}
	if start+limit < len(heads) {
		out.NextPageToken = encodeInboxToken(page[len(page)-1])
	}
	if len(page) == 0 {
		return connect.NewResponse(out), nil
	}
	listed := make([]string, len(page))
	for i, h := range page {
		listed[i] = h.Channel
	}
	counts, err := g.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: user, ChannelId: listed}))
	if err != nil {
		return nil, err
	}
	byChannel := make(map[string]*receiptsv1.ChannelUnread, len(page))
	for _, c := range counts.Msg.GetChannels() {
		byChannel[c.GetChannelId()] = c
	}
	refs := make([]redisstore.MessageRef, 0, len(page))
	for _, h := range page {
		c := byChannel[h.Channel]
		if c == nil {
			continue // left between the two reads
		}
		out.Lines = append(out.Lines, &receiptsv1.InboxLine{Channel: c, LastActivityUnixMs: h.UpdatedAtUnixMs})
		refs = append(refs, redisstore.MessageRef{Channel: h.Channel, Seq: c.GetFirstUnreadSeq()})
	}
	g.firstUnreadIDs(ctx, out.Lines, refs)
	return connect.NewResponse(out), nil
}

// newestFirst orders heads by time, newest first, then by channel.
func newestFirst(a, b channel.Head) int {
	if c := cmp.Compare(b.UpdatedAtUnixMs, a.UpdatedAtUnixMs); c != 0 {
		return c
	}
	return strings.Compare(a.Channel, b.Channel)
}

// inboxOrder is the user's default channel set with each channel's head.
// When Redis cannot answer alone, the unread read (which hydrates what
// Redis lacks, or answers from Postgres) gives it.
func (g *Gate) inboxOrder(ctx context.Context, user string) ([]channel.Head, error) {
	rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	heads, complete, err := g.redis.InboxOrder(rctx, user)
	cancel()
	switch {
	case err == nil && complete:
		return heads, nil
	case err != nil && !errors.Is(err, redisstore.ErrTooManyChannels):
		if cerr := contextError(ctx, err); cerr != nil {
			return nil, cerr
		}
		g.m.redisDegraded.WithLabelValues(redisOpGet).Inc()
		g.warnRedis(redisOpGet, err)
	}
	views, _, err := g.unreadPage(ctx, user, nil, redisstore.Page{Limit: MaxChannelPageSize}, nil)
	if err != nil {
		return nil, err
	}
	heads = make([]channel.Head, len(views))
	for i, v := range views {
		heads[i] = v.Head
		heads[i].Channel = v.Channel
	}
	return heads, nil
}

// firstUnreadIDs fills each line's first unread message id where Redis
// keeps it; without Redis the lines go without.
func (g *Gate) firstUnreadIDs(ctx context.Context, lines []*receiptsv1.InboxLine, refs []redisstore.MessageRef) {
	rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	ids, err := g.redis.MessageIDs(rctx, refs)
	cancel()
	if err != nil {
		g.m.redisDegraded.WithLabelValues(redisOpGet).Inc()
		g.warnRedis(redisOpGet, err)
		return
	}
	for i, id := range ids {
		lines[i].FirstUnreadMessageId = id
	}
}

// An inbox page token is the last line's (activity, channel).
func encodeInboxToken(h channel.Head) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(h.UpdatedAtUnixMs, 10) + " " + h.Channel))
}

func decodeInboxToken(tok string) (channel.Head, bool, error) {
	if tok == "" {
		return channel.Head{}, false, nil
	}
	bad := invalid(apierr.InvalidField, &receipt.FieldError{Field: "page_token", Reason: "is not a token this call gave"})
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return channel.Head{}, false, bad
	}
	at, ch, ok := strings.Cut(string(b), " ")
	ms, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || ms < 0 || receipt.ValidateID("channel_id", ch) != nil {
		return channel.Head{}, false, bad
	}
	return channel.Head{Channel: ch, UpdatedAtUnixMs: ms}, true, nil
}
