package e2e

import (
	"slices"
	"sync"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/receipt"
)

// The read-by test's model: what every acknowledged operation implies
// for read-by, ticks and badges.

// rbMove is one acknowledged operation that put a public cursor at seq,
// with the time just before it was sent (a lower bound of its "at").
type rbMove struct{ seq, start int64 }

// rbKey is the model of one (user, channel).
type rbKey struct {
	// read is the public read (the greatest by (seq, epoch)), private the
	// user's own position (the greatest by (epoch, seq) of every read,
	// private read and mark-unread).
	read, private receipt.Position
	delivered     int64
	member        bool
	// The public read and delivered moves, to bound the "at" times.
	readMoves, delMoves []rbMove
	// lastEnd is when the last acknowledged operation on the key answered
	// (an upper bound of every time the stores hold for it).
	lastEnd int64
}

func (k *rbKey) epoch() int64 { return max(k.read.Epoch, k.private.Epoch) }

func (k *rbKey) effective() receipt.Position {
	if k.private.Compare(k.read) > 0 {
		return k.private
	}
	return k.read
}

// raiseRead applies a public read at the current epoch: reading implies
// delivery, whether or not the read moves.
func (k *rbKey) raiseRead(seq, start int64) {
	p := receipt.Position{Epoch: k.epoch(), Seq: seq}
	if p.CompareBySeq(k.read) > 0 {
		k.read = p
	}
	if p.Compare(k.private) > 0 {
		k.private = p
	}
	k.delivered = max(k.delivered, seq)
	k.readMoves = append(k.readMoves, rbMove{seq, start})
	k.delMoves = append(k.delMoves, rbMove{seq, start})
}

// rbShare is a user's privacy settings.
type rbShare struct{ read, delivered bool }

// rbModel is the reference model of read-by, ticks and badges, from
// acknowledged operations only. Every operation on a user's cursors,
// membership and settings comes from the one client that owns the user,
// in order, so the model applies them in that order.
type rbModel struct {
	mu      sync.Mutex
	heads   map[string]int64
	senders map[string]map[int64]string
	keys    map[receipt.Key]*rbKey
	share   map[string]rbShare
	erased  map[string]bool
	ops     int
}

func (m *rbModel) key(k receipt.Key) *rbKey {
	mk := m.keys[k]
	if mk == nil {
		mk = &rbKey{}
		m.keys[k] = mk
	}
	return mk
}

func (m *rbModel) shares(u string) rbShare {
	if s, ok := m.share[u]; ok {
		return s
	}
	return rbShare{read: true, delivered: true}
}

// members are the channel's joined members, sorted.
func (m *rbModel) members(ch string, users []string) []string {
	var out []string
	for _, u := range users {
		if mk := m.keys[receipt.Key{User: u, Channel: ch}]; mk != nil && mk.member && !m.erased[u] {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// at bounds: the first acknowledged move at or past seq was sent no
// earlier than lo; nothing on the key happened after hi.
func firstReach(moves []rbMove, seq int64) int64 {
	lo := int64(-1)
	for _, mv := range moves {
		if mv.seq >= seq && (lo < 0 || mv.start < lo) {
			lo = mv.start
		}
	}
	return lo
}

// wantReceipts is the model's answer for one message, and the bounds of
// each listed member's "at" (read_by, then delivered_to).
func (m *rbModel) wantReceipts(ch string, seq int64, users []string) (*receiptsv1.MessageReceipts, map[string][2]int64, map[string][2]int64) {
	sender := m.senders[ch][seq]
	members := m.members(ch, users)
	out := &receiptsv1.MessageReceipts{ChannelId: ch, Seq: seq, SenderId: sender, MemberCount: int64(len(members)),
		Detailed: len(members) <= rbThreshold}
	readAt, delAt := map[string][2]int64{}, map[string][2]int64{}
	for _, u := range members {
		if u == sender {
			continue
		}
		mk, sh := m.keys[receipt.Key{User: u, Channel: ch}], m.shares(u)
		if sh.read && mk.read.Seq >= seq {
			out.ReadCount++
			out.ReadBy = append(out.ReadBy, &receiptsv1.MemberAt{UserId: u})
			readAt[u] = [2]int64{firstReach(mk.readMoves, seq), mk.lastEnd}
		} else {
			out.Pending = append(out.Pending, u)
		}
		if sh.delivered && mk.delivered >= seq {
			out.DeliveredCount++
			out.DeliveredTo = append(out.DeliveredTo, &receiptsv1.MemberAt{UserId: u})
			delAt[u] = [2]int64{firstReach(mk.delMoves, seq), mk.lastEnd}
		}
	}
	if !out.Detailed {
		out.ReadBy, out.DeliveredTo, out.Pending = nil, nil, nil
	}
	return out, readAt, delAt
}

// wantTicks is the model's ticks of a channel: in a small channel the
// least public cursor over the members who share that kind (no cursor =
// 0, a member hiding it skipped); in a large one the least cursor when
// every member shows one, else 0 (docs/architecture.md, read-by).
func (m *rbModel) wantTicks(ch string, users []string) *receiptsv1.ChannelTicks {
	members := m.members(ch, users)
	out := &receiptsv1.ChannelTicks{ChannelId: ch, MemberCount: int64(len(members)), Detailed: len(members) <= rbThreshold}
	if h := m.heads[ch]; h > 0 {
		out.Head = &receiptsv1.Position{Seq: h}
	}
	leastRead, leastDel := int64(-1), int64(-1)
	coveredRead, coveredDel := true, true
	for _, u := range members {
		mk, sh := m.keys[receipt.Key{User: u, Channel: ch}], m.shares(u)
		mc := &receiptsv1.MemberCursors{UserId: u}
		if sh.read {
			mc.Read = &receiptsv1.Position{Epoch: mk.read.Epoch, Seq: mk.read.Seq}
			if leastRead < 0 || mk.read.Seq < leastRead {
				leastRead = mk.read.Seq
			}
		}
		coveredRead = coveredRead && sh.read && !mk.read.IsZero()
		if sh.delivered {
			mc.Delivered = &receiptsv1.Position{Seq: mk.delivered}
			if leastDel < 0 || mk.delivered < leastDel {
				leastDel = mk.delivered
			}
		}
		coveredDel = coveredDel && sh.delivered && mk.delivered > 0
		out.Members = append(out.Members, mc)
	}
	out.ReadByAllUpTo, out.DeliveredToAllUpTo = max(leastRead, 0), max(leastDel, 0)
	if !out.Detailed {
		out.Members = nil
		if !coveredRead {
			out.ReadByAllUpTo = 0
		}
		if !coveredDel {
			out.DeliveredToAllUpTo = 0
		}
	}
	return out
}

// wantBadge is a user's unread totals over the channels they are a member of.
func (m *rbModel) wantBadge(u string, channels []string) *receiptsv1.Badge {
	b := &receiptsv1.Badge{UserId: u}
	for _, ch := range channels {
		mk := m.keys[receipt.Key{User: u, Channel: ch}]
		if mk == nil || !mk.member || m.erased[u] {
			continue
		}
		if un := m.heads[ch] - mk.effective().Seq; un > 0 {
			b.UnreadTotal += un
			b.ChannelsWithUnread++
		}
	}
	return b
}
