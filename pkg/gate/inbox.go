package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/gate/threadcalls"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/views/unread"
)

// Inbox page sizes.
const (
	InboxLimitDefault = 50
	MaxInboxLimit     = 200
)

// GetInbox implements receiptsv1connect.ReceiptServiceHandler. The order
// comes from the user's channel set and the heads alone (no counting):
// one read of the user's hashes and one MGET of the heads, and, for a user
// with thread registers, the followed threads (ListThreads' read); the
// counts of the page's channels are GetUnread's, of those only.
func (g *Gate) GetInbox(ctx context.Context, req *connect.Request[receiptsv1.GetInboxRequest]) (*connect.Response[receiptsv1.GetInboxResponse], error) {
	user := req.Msg.GetUserId()
	if err := receipt.ValidateID("user_id", user); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	limit := int(req.Msg.GetLimit())
	switch {
	case limit == 0:
		limit = InboxLimitDefault
	case limit < 0 || limit > MaxInboxLimit:
		return nil, seam.Invalid(apierr.InvalidField, &receipt.FieldError{Field: "limit", Reason: fmt.Sprintf("must be within [1, %d], got %d", MaxInboxLimit, limit)})
	}
	after, hasAfter, err := threadcalls.DecodeActivityToken(req.Msg.GetPageToken(), true)
	if err != nil {
		return nil, err
	}
	items, threads, err := g.inboxItems(ctx, user)
	if err != nil {
		return nil, err
	}
	if hasAfter {
		items = slices.DeleteFunc(items, func(h thread.Head) bool { return threadcalls.CompareActivity(&h, &after) <= 0 })
	}
	page := firstInOrder(items, limit, threadcalls.CompareActivity)
	out := &receiptsv1.GetInboxResponse{UserId: user}
	if len(items) > limit {
		out.NextPageToken = threadcalls.EncodeActivityToken(page[len(page)-1])
	}
	if len(page) == 0 {
		return connect.NewResponse(out), nil
	}
	var listed []string
	for _, h := range page {
		if h.Root == 0 {
			listed = append(listed, h.Channel)
		}
	}
	byChannel := map[string]*receiptsv1.ChannelUnread{}
	if len(listed) > 0 {
		counts, err := g.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: user, ChannelId: listed}))
		if err != nil {
			return nil, err
		}
		for _, c := range counts.Msg.GetChannels() {
			byChannel[c.GetChannelId()] = c
		}
	}
	// A first unread message that is the head's (often the one new
	// message) has its id in the head already; the others are looked up.
	refs := make([]heads.MessageRef, 0, len(page))
	var lookedUp []*receiptsv1.InboxLine
	for _, h := range page {
		line := &receiptsv1.InboxLine{LastActivityUnixMs: h.UpdatedAtUnixMs}
		first := int64(0)
		if h.Root == 0 {
			if line.Channel = byChannel[h.Channel]; line.Channel == nil {
				continue // left between the two reads
			}
			first = line.Channel.GetFirstUnreadSeq()
		} else {
			t := threads[h.Ref]
			line.Thread = g.ThreadUnread(*t.State, t.Head, t.Counts, true)
			first = line.Thread.GetFirstUnreadSeq()
		}
		out.Lines = append(out.Lines, line)
		switch {
		case first == 0:
		case first == h.Seq && h.MessageID != "":
			line.FirstUnreadMessageId = h.MessageID
		default:
			refs = append(refs, heads.MessageRef{Channel: h.Channel, Root: h.Root, Seq: first})
			lookedUp = append(lookedUp, line)
		}
	}
	if len(refs) > 0 {
		g.firstUnreadIDs(ctx, lookedUp, refs)
	}
	return connect.NewResponse(out), nil
}

// inboxItems is what the inbox orders: the head of each channel of the
// user's default set (root 0) and of each followed thread with unread
// replies (those also by ref, with the user's register).
func (g *Gate) inboxItems(ctx context.Context, user string) ([]thread.Head, map[thread.Ref]threadcalls.FollowedThread, error) {
	heads, threadsNone, err := g.inboxOrder(ctx, user)
	if err != nil {
		return nil, nil, err
	}
	items := make([]thread.Head, len(heads), len(heads)+1)
	for i, h := range heads {
		items[i] = thread.Head{Ref: thread.Ref{Channel: h.Channel}, Seq: h.Seq, MessageID: h.MessageID, UpdatedAtUnixMs: h.UpdatedAtUnixMs}
	}
	if threadsNone {
		return items, nil, nil
	}
	ts, err := g.FollowedThreads(ctx, user, "")
	if err != nil {
		// The channel lines still answer: a thread problem never fails
		// them (a caller that left still ends the call).
		if cerr := seam.ContextError(ctx, err); cerr != nil {
			return nil, nil, cerr
		}
		g.WarnRedis(ctx, seam.RedisOpGet+" threads", err)
		return items, nil, nil
	}
	threads := make(map[thread.Ref]threadcalls.FollowedThread, len(ts))
	for _, t := range ts {
		if t.Counts.Unread == 0 {
			continue
		}
		items = append(items, t.Head)
		threads[t.Head.Ref] = t
	}
	return items, threads, nil
}

// inboxOrder is the user's default channel set with each channel's head,
// and whether Redis showed the user has no thread register. When Redis
// cannot answer alone, the unread read (which hydrates what Redis lacks,
// or answers from Postgres) gives it.
func (g *Gate) inboxOrder(ctx context.Context, user string) ([]channel.Head, bool, error) {
	probe := g.ThreadStore().Probe()
	order, err := g.unreadStore().Order(ctx, user, probe)
	switch {
	case err == nil && order.Complete:
		return order.Heads, probe.None(), nil
	case err != nil && !errors.Is(err, redisstore.ErrTooManyChannels):
		if cerr := seam.ContextError(ctx, err); cerr != nil {
			return nil, false, cerr
		}
		g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, err)
	}
	var seen unreadSeen
	views, _, err := g.unreadPage(ctx, user, nil, unread.Page{Limit: seam.MaxChannelPageSize}, &seen)
	if err != nil {
		return nil, false, err
	}
	heads := make([]channel.Head, len(views))
	for i, v := range views {
		heads[i] = v.Head
		heads[i].Channel = v.Channel
	}
	return heads, seen.threadsNone, nil
}

// firstUnreadIDs fills each line's first unread message id where Redis
// keeps it; without Redis the lines go without.
func (g *Gate) firstUnreadIDs(ctx context.Context, lines []*receiptsv1.InboxLine, refs []heads.MessageRef) {
	ids, err := g.HeadStore().MessageIDs(ctx, refs)
	if err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, err)
		return
	}
	for i, id := range ids {
		lines[i].FirstUnreadMessageId = id
	}
}

// firstInOrder is the first n of items by cmp, in order, without sorting
// the rest: a whole sort of a thousand heads took a fifth of the inbox's
// time for a page of 50. A max-heap of the n least seen so far, by index,
// takes each item in one comparison with its top unless it belongs in
// the page.
func firstInOrder[T any](items []T, n int, cmp func(a, b *T) int) []T {
	h := make([]int32, 0, n)
	above := func(a, b int32) bool { return cmp(&items[a], &items[b]) > 0 }
	down := func(i int) {
		for {
			top, l := i, 2*i+1
			if l < len(h) && above(h[l], h[top]) {
				top = l
			}
			if r := l + 1; r < len(h) && above(h[r], h[top]) {
				top = r
			}
			if top == i {
				return
			}
			h[i], h[top] = h[top], h[i]
			i = top
		}
	}
	for i := range items {
		switch {
		case len(h) < n:
			h = append(h, int32(i))
			for j := len(h) - 1; j > 0 && above(h[j], h[(j-1)/2]); j = (j - 1) / 2 {
				h[j], h[(j-1)/2] = h[(j-1)/2], h[j]
			}
		case cmp(&items[i], &items[h[0]]) < 0:
			h[0] = int32(i)
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b int32) int { return cmp(&items[a], &items[b]) })
	out := make([]T, len(h))
	for k, i := range h {
		out[k] = items[i]
	}
	return out
}
