package unread

import (
	"slices"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// Input is what one user's counts in one channel are made of, as either
// store holds it: the Redis read and the Postgres fallback each fill it
// and hand it to Count, so the badge rule exists once.
type Input struct {
	// State is the user's cursors (HasState false: none stored).
	State    receipt.State
	HasState bool
	// Membership is the user's register (HasMembership false: none).
	Membership    channel.Membership
	HasMembership bool
	// Head is the channel's head; HeadKnown false means the store knows
	// nothing of it (a known channel without messages has seq 0).
	Head      channel.Head
	HeadKnown bool
	// MentionSeqs are the user's kept mention seqs in the channel,
	// ascending (a read may leave out those at or below the read, which
	// never count).
	MentionSeqs []int64
	// GroupSeqs are the channel's group mention seqs not sent by the
	// user, ascending (likewise).
	GroupSeqs []int64
	// Deletions is how the channel's deletions change the counts above
	// the read (Known false: nothing deleted there, or not asked).
	Deletions deletions.Count
}

// Level is the user's effective notification level in a channel and
// whether a mute is in force (notification.Register.Effective).
type Level struct {
	Level notification.Level
	Muted bool
}

// Counts are one channel's counts for one user at a level.
type Counts struct {
	// Unread and FirstUnread are the unread messages (head less the
	// effective read, less the deleted ones) and the first of them (0:
	// none).
	Unread, FirstUnread int64
	// Mentions counts the unread mentions, with the group mentions where
	// the level counts them (CountsGroupMentions); MentionsCapped: more
	// than the cap.
	Mentions       int64
	MentionsCapped bool
	// CountsUnread and CountsMentions say what of it the badge sums at
	// the level (notification.Counts).
	CountsUnread, CountsMentions bool
}

// CountsGroupMentions says whether a channel's group mentions count for
// a user at an effective level: at all and mentions (muted or not),
// never at none.
func CountsGroupMentions(l notification.Level) bool {
	return l == notification.All || l == notification.Mentions
}

// Count is the badge rule: one user's counts in one channel at a level.
// Unread is the head less the effective read (sequences are dense), less
// the deleted messages above the read; a channel without unread messages
// has no mentions (a mention is at or below its channel's head, and a
// deleted message mentions no one). Mentions are the kept mention seqs
// above the read that are not deleted and, at a level that counts them,
// the group mentions of a channel the user has not left, each message
// once; a group mention count is at most cap+1 (each set keeps cap+1).
func Count(in Input, at Level, mentionCap int) Counts {
	var c Counts
	c.CountsUnread, c.CountsMentions = notification.Counts(at.Level, at.Muted)
	c.Unread, c.FirstUnread = channel.Unread(in.Head.Seq, in.State)
	if d := in.Deletions; d.Known && c.Unread > 0 {
		c.Unread, c.FirstUnread = channel.AfterDeletions(c.Unread, d.FirstKept, d.Deleted)
	}
	if c.Unread == 0 {
		return c
	}
	read := in.State.EffectiveRead().Seq
	deleted := in.Deletions.DeletedMentions
	kept := live(in.MentionSeqs, read, deleted)
	left := in.HasMembership && !in.Membership.Member
	if CountsGroupMentions(at.Level) && !left {
		if group := live(in.GroupSeqs, read, deleted); len(group) > 0 {
			c.Mentions, c.MentionsCapped = channel.MentionCountWithGroup(kept, group, read, mentionCap)
			return c
		}
	}
	c.Mentions, c.MentionsCapped = int64(len(kept)), len(kept) > mentionCap
	return c
}

// live is the seqs above read that are not deleted (deleted: any order,
// short), ascending as seqs are.
func live(seqs []int64, read int64, deleted []int64) []int64 {
	i, _ := slices.BinarySearch(seqs, read+1)
	seqs = seqs[i:]
	if len(deleted) == 0 {
		return seqs
	}
	return slices.DeleteFunc(slices.Clone(seqs), func(q int64) bool { return slices.Contains(deleted, q) })
}
