package readby

import (
	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Sight is what read-by and ticks answer from for one channel: its member
// count and, for a small (Detailed) channel, its joined members with
// their settings and public cursors as others may see them; a large
// channel answers from its view's Counts instead.
type Sight struct {
	Channel     string
	MemberCount int64
	Detailed    bool
	Head        *channel.Head
	// Detailed channels only: the joined members (sorted), their
	// settings, the view's cursors.
	Members  []string
	Settings map[string]privacy.Settings
	View     State
}

// Visible returns a member's cursor of a side as others may see it.
func (s *Sight) Visible(user string, side Side) (Cursor, bool) {
	if st, ok := s.Settings[user]; ok && !st.Shares(string(side)) {
		return Cursor{}, false
	}
	src := s.View.Read
	if side == Delivered {
		src = s.View.Delivered
	}
	c, ok := src[user]
	return c, ok
}

// Receipts answers one message of a detailed channel: read_by and
// delivered_to are the members (less the sender) whose visible cursor is
// at or past seq, at the view's time of that cursor, pending the rest;
// reached lists the members whose "at" the cursor-move log may tell
// better (FirstReached, then WithFirstReached).
func (s *Sight) Receipts(seq int64, sender string) (out *receiptsv1.MessageReceipts, reached []string) {
	out = &receiptsv1.MessageReceipts{ChannelId: s.Channel, Seq: seq, Detailed: true, MemberCount: s.MemberCount, SenderId: sender}
	for _, u := range s.Members {
		if u == sender {
			continue
		}
		if c, ok := s.Visible(u, Read); ok && c.Position.Seq >= seq {
			out.ReadBy = append(out.ReadBy, &receiptsv1.MemberAt{UserId: u, AtUnixMs: c.AtUnixMs})
			reached = append(reached, u)
		} else {
			out.Pending = append(out.Pending, u)
		}
		if c, ok := s.Visible(u, Delivered); ok && c.Position.Seq >= seq {
			out.DeliveredTo = append(out.DeliveredTo, &receiptsv1.MemberAt{UserId: u, AtUnixMs: c.AtUnixMs})
			reached = append(reached, u)
		}
	}
	out.ReadCount, out.DeliveredCount = int64(len(out.ReadBy)), int64(len(out.DeliveredTo))
	return out, reached
}

// WithFirstReached sets each listed member's "at" to when the move log
// says their cursor first reached the message (read, delivered by user;
// the view's time stays where the log has none).
func WithFirstReached(out *receiptsv1.MessageReceipts, read, delivered map[string]int64) {
	for _, ma := range out.ReadBy {
		if at, ok := read[ma.UserId]; ok {
			ma.AtUnixMs = at
		}
	}
	for _, ma := range out.DeliveredTo {
		if at, ok := delivered[ma.UserId]; ok {
			ma.AtUnixMs = at
		}
	}
}

// CountedReceipts answers one message of a large channel from its view's
// counts at the message (Count at seq, the sender left out).
func (s *Sight) CountedReceipts(seq int64, sender string, c Counts) *receiptsv1.MessageReceipts {
	return &receiptsv1.MessageReceipts{ChannelId: s.Channel, Seq: seq, MemberCount: s.MemberCount, SenderId: sender,
		ReadCount: c.Read, DeliveredCount: c.Delivered}
}

// Ticks computes a detailed channel's watermarks: the least public
// cursor seq over the members who share that side (a member without a
// cursor counts as 0; members who share nothing of a side are skipped).
func (s *Sight) Ticks() *receiptsv1.ChannelTicks {
	out := s.ticks()
	leastRead, leastDel := int64(-1), int64(-1)
	for _, u := range s.Members {
		mc := &receiptsv1.MemberCursors{UserId: u}
		if st := s.Settings[u]; st.ShareRead {
			c, _ := s.Visible(u, Read)
			mc.Read = &receiptsv1.Position{Epoch: c.Position.Epoch, Seq: c.Position.Seq}
			if leastRead < 0 || c.Position.Seq < leastRead {
				leastRead = c.Position.Seq
			}
		}
		if st := s.Settings[u]; st.ShareDelivered {
			c, _ := s.Visible(u, Delivered)
			mc.Delivered = &receiptsv1.Position{Epoch: c.Position.Epoch, Seq: c.Position.Seq}
			if leastDel < 0 || c.Position.Seq < leastDel {
				leastDel = c.Position.Seq
			}
		}
		out.Members = append(out.Members, mc)
	}
	out.ReadByAllUpTo, out.DeliveredToAllUpTo = max(leastRead, 0), max(leastDel, 0)
	return out
}

// CountedTicks computes a large channel's watermarks from its view's
// counts (Count at 0): the least of a sorted set when it covers every
// member, else 0 (there, members hiding a side count as not reached).
func (s *Sight) CountedTicks(c Counts) *receiptsv1.ChannelTicks {
	out := s.ticks()
	if c.ReadMembers >= s.MemberCount {
		out.ReadByAllUpTo = c.LeastRead
	}
	if c.DeliveredMembers >= s.MemberCount {
		out.DeliveredToAllUpTo = c.LeastDelivered
	}
	return out
}

func (s *Sight) ticks() *receiptsv1.ChannelTicks {
	out := &receiptsv1.ChannelTicks{ChannelId: s.Channel, MemberCount: s.MemberCount, Detailed: s.Detailed}
	if s.Head != nil {
		out.Head = &receiptsv1.Position{Seq: s.Head.Seq}
	}
	return out
}

// RebuildMoves are the moves a page of the members' durable cursors puts
// into ch's view: the sides each member shares, none that may predate
// the member's erasure as Redis holds it (tombs: the persister may not
// have deleted an erased user's rows yet).
func RebuildMoves(ch string, page []MemberCursor, tombs tombstone.Set) []Move {
	var moves []Move
	for _, c := range page {
		if t, ok := tombs[c.User]; ok && t.Predates(c.UpdatedAtUnixMs) {
			continue
		}
		if c.ShareRead && !c.Read.IsZero() {
			moves = append(moves, Move{Channel: ch, User: c.User, Side: Read, Position: c.Read, AtUnixMs: c.UpdatedAtUnixMs})
		}
		if c.ShareDelivered && !c.Delivered.IsZero() {
			moves = append(moves, Move{Channel: ch, User: c.User, Side: Delivered, Position: c.Delivered, AtUnixMs: c.UpdatedAtUnixMs})
		}
	}
	return moves
}

// MergeMoves merges moves into v (a detailed channel's view as read
// before its rebuild): each member's greater cursor per side.
func MergeMoves(v *State, moves []Move) {
	if v.Read == nil {
		v.Read, v.Delivered = map[string]Cursor{}, map[string]Cursor{}
	}
	for _, m := range moves {
		into := v.Read
		if m.Side == Delivered {
			into = v.Delivered
		}
		if cur, ok := into[m.User]; !ok || m.Position.Compare(cur.Position) > 0 {
			into[m.User] = Cursor{Position: m.Position, AtUnixMs: m.AtUnixMs}
		}
	}
}
