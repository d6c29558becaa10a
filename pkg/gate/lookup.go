package gate

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/gate/threadcalls"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
	"github.com/readstate/receipts/pkg/views/unread"
)

// LookupReceipts answers read-by and badges together: a read-by part
// (readbycalls) and an unread part (the badges).

// MaxLookupItems bounds LookupReceipts' messages and badges each.
const MaxLookupItems = 500

// LookupReceipts implements receiptsv1connect.ReceiptServiceHandler.
func (g *Gate) LookupReceipts(ctx context.Context, req *connect.Request[receiptsv1.LookupReceiptsRequest]) (*connect.Response[receiptsv1.LookupReceiptsResponse], error) {
	m := req.Msg
	if n := len(m.GetMessages()); n > MaxLookupItems {
		return nil, seam.TooMany("messages", fmt.Sprintf("has %d items", n), MaxLookupItems)
	}
	if n := len(m.GetBadgeUserIds()); n > MaxLookupItems {
		return nil, seam.TooMany("badge_user_ids", fmt.Sprintf("has %d items", n), MaxLookupItems)
	}
	if len(m.GetMessages()) == 0 && len(m.GetBadgeUserIds()) == 0 {
		return nil, seam.Invalid(apierr.EmptyRequest, errors.New("messages and badge_user_ids are both empty"))
	}
	for i, ref := range m.GetMessages() {
		if err := seam.ValidateChannelSeq(fmt.Sprintf("messages[%d].", i), ref.GetChannelId(), ref.GetSeq(), ref.GetSenderId()); err != nil {
			return nil, err
		}
	}
	for i, u := range m.GetBadgeUserIds() {
		if err := receipt.ValidateID(fmt.Sprintf("badge_user_ids[%d]", i), u); err != nil {
			return nil, seam.Invalid(apierr.InvalidID, err)
		}
	}
	out := &receiptsv1.LookupReceiptsResponse{}
	// One sight per channel, however many of its messages are asked.
	sights := map[string]*readby.Sight{}
	for _, ref := range m.GetMessages() {
		s, ok := sights[ref.GetChannelId()]
		if !ok {
			var err error
			if s, err = g.Sight(ctx, ref.GetChannelId()); err != nil {
				return nil, err
			}
			sights[ref.GetChannelId()] = s
		}
		r, err := g.ReceiptsOf(ctx, s, ref.GetSeq(), ref.GetSenderId())
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, r)
	}
	for _, u := range m.GetBadgeUserIds() {
		var seen unreadSeen
		views, _, err := g.unreadPage(ctx, u, nil, unread.Page{}, &seen)
		if err != nil {
			return nil, err
		}
		// A badge reads every channel of its user: the caller pays for
		// each (beyond the badge's own event), and a call over its limit
		// stops here.
		if err := seam.Charge(ctx, len(views)+1); err != nil {
			return nil, err
		}
		var threads map[string]threadcalls.ThreadCounts
		if !seen.threadsNone {
			if threads, err = g.ThreadCountsOrNone(ctx, u); err != nil {
				return nil, err
			}
		}
		lv, err := g.levelsOf(ctx, u, viewChannels(views), seen.levels)
		if err != nil {
			return nil, err
		}
		b := &receiptsv1.Badge{UserId: u}
		for _, tc := range threads {
			b.UnreadThreadsTotal += tc.UnreadThreads
		}
		for _, v := range views {
			level, _, countsUnread, countsMentions := lv.of(v.Channel)
			if countsUnread {
				b.UnreadTotal += v.Unread
				if v.Unread > 0 {
					b.ChannelsWithUnread++
				}
			}
			if countsMentions {
				mentions, capped := v.MentionsAt(countsGroupMentions(level))
				b.MentionTotal += v.Shown(mentions)
				b.MentionsCapped = b.MentionsCapped || capped
			}
		}
		out.Badges = append(out.Badges, b)
	}
	return connect.NewResponse(out), nil
}
