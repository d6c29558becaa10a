package channel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/readstate/receipts/pkg/receipt"
)

// GroupMention is a message that mentions every member of its channel
// (@channel, @here) but its sender (Sender "" when the notice named none).
type GroupMention struct {
	Seq    int64
	Sender string
}

// GroupMentions is a channel's group mentions: ascending by seq, one per
// seq, the newest cap+1 kept (MergeGroupMentions). They belong to no user:
// each member's mention count reads them, so storage does not grow with
// the channel's members.
type GroupMentions struct {
	Channel  string
	Mentions []GroupMention
}

// MaxGroupMentionsPerEvent bounds the group mentions of one channel event
// (each at most an id and a seq: the event stays under its size bound).
const MaxGroupMentionsPerEvent = 20

// compareGroupMention orders by seq, then by sender (bytes).
func compareGroupMention(a, b GroupMention) int {
	if a.Seq != b.Seq {
		return int(sign(a.Seq - b.Seq))
	}
	return strings.Compare(a.Sender, b.Sender)
}

func sign(x int64) int64 {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// MergeGroupMentions is the union of a and b kept to the newest cap+1
// seqs. Two entries of one seq (notices that disagree on its sender) keep
// the least sender in byte order, so the rule stays commutative,
// associative and idempotent.
func MergeGroupMentions(a, b []GroupMention, cap int) []GroupMention {
	if len(b) == 0 && slices.IsSortedFunc(a, compareGroupMention) && len(a) <= cap+1 {
		return a
	}
	out := make([]GroupMention, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.SortFunc(out, compareGroupMention)
	// One per seq: the first of a run (the least sender).
	out = slices.CompactFunc(out, func(x, y GroupMention) bool { return x.Seq == y.Seq })
	if keep := cap + 1; len(out) > keep {
		out = out[len(out)-keep:]
	}
	return out
}

// Validate checks a channel's group mentions as an event carries them.
func (g GroupMentions) Validate() error {
	if err := receipt.ValidateID("channel_id", g.Channel); err != nil {
		return err
	}
	if len(g.Mentions) > MaxGroupMentionsPerEvent {
		return &receipt.FieldError{Field: "group_mentions", Reason: fmt.Sprintf("has %d; the limit is %d", len(g.Mentions), MaxGroupMentionsPerEvent)}
	}
	for i, m := range g.Mentions {
		if err := receipt.ValidateSeq(fmt.Sprintf("group_mentions[%d].seq", i), m.Seq); err != nil {
			return err
		}
		if err := receipt.ValidateOptionalID(fmt.Sprintf("group_mentions[%d].sender_id", i), m.Sender); err != nil {
			return err
		}
	}
	return nil
}

// GroupMentionSeqsFor is the seqs of group mentions above readSeq that
// mention user (every one not sent by user), ascending.
func GroupMentionSeqsFor(gms []GroupMention, user string, readSeq int64) []int64 {
	var out []int64
	for _, m := range gms {
		if m.Seq > readSeq && m.Sender != user {
			out = append(out, m.Seq)
		}
	}
	return out
}

// MentionCountWithGroup is MentionCount (at most cap+1) of the union of a user's kept
// mention seqs and the group mention seqs that mention the user (both
// ascending): a message both names and group-mentions the user once.
func MentionCountWithGroup(kept, group []int64, readSeq int64, cap int) (count int64, capped bool) {
	i, j := 0, 0
	for i < len(kept) || j < len(group) {
		var s int64
		switch {
		case j == len(group) || (i < len(kept) && kept[i] < group[j]):
			s, i = kept[i], i+1
		case i == len(kept) || group[j] < kept[i]:
			s, j = group[j], j+1
		default:
			s, i, j = kept[i], i+1, j+1
		}
		if s > readSeq {
			count++
		}
	}
	// Each set keeps cap+1: their union may hold more, shown as "cap+" too.
	return min(count, int64(cap)+1), count > int64(cap)
}
