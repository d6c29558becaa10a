// Package thread holds the rules of threads: a thread is (channel, root
// seq), the root a channel message; replies are numbered densely per
// thread by the upstream, so a user's unread count in a thread is the
// thread's head minus the user's thread read cursor, as in a channel.
// Replies never touch the channel's head or counts.
//
// Two kinds of state: the thread's head (a max-register, like a channel
// head) and one register per (user, thread) holding the user's thread
// cursors, the follow register and the mentions. Keeping the three in one
// value is what makes a followed thread cost one Redis field and one
// Postgres row; the register is still a product of three rules, each
// commutative, associative and idempotent, so the product is too. Like
// pkg/receipt and pkg/channel it imports no store.
package thread

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// Ref names a thread: its channel and the channel seq of its root.
type Ref struct {
	Channel string
	Root    int64
}

// Compare orders threads by channel, then root.
func (r Ref) Compare(o Ref) int {
	if c := strings.Compare(r.Channel, o.Channel); c != 0 {
		return c
	}
	return cmp.Compare(r.Root, o.Root)
}

// Validate checks a thread's ids.
func (r Ref) Validate() error {
	if err := receipt.ValidateID("channel_id", r.Channel); err != nil {
		return err
	}
	return receipt.ValidateSeq("root_seq", r.Root)
}

func (r Ref) String() string { return fmt.Sprintf("%s/%d", r.Channel, r.Root) }

// Key names one user's place in one thread.
type Key struct {
	User string
	Ref
}

// Compare orders keys by user, channel, root: the order rows are written in.
func (k Key) Compare(o Key) int {
	if c := strings.Compare(k.User, o.User); c != 0 {
		return c
	}
	return k.Ref.Compare(o.Ref)
}

// ChannelKey is the (user, channel) of the thread's channel: the record
// key of the user's thread events, so that they share the partition of
// the user's channel events and keep their order.
func (k Key) ChannelKey() receipt.Key { return receipt.Key{User: k.User, Channel: k.Channel} }

// Validate checks a key's ids.
func (k Key) Validate() error {
	if err := receipt.ValidateID("user_id", k.User); err != nil {
		return err
	}
	return k.Ref.Validate()
}

// Head is a thread's head: the greatest reply seq notified, with its
// message id and the time it advanced (the thread's last activity).
type Head struct {
	Ref
	Seq             int64
	MessageID       string
	UpdatedAtUnixMs int64
}

// MergeHead is the head's max-register: the greater seq wins with its
// message id; the time is the greater of the two; a tie keeps stored.
func MergeHead(stored, incoming Head) (Head, bool) {
	ref := stored.Ref
	if ref == (Ref{}) {
		ref = incoming.Ref
	}
	at := max(stored.UpdatedAtUnixMs, incoming.UpdatedAtUnixMs)
	if incoming.Seq > stored.Seq {
		incoming.Ref, incoming.UpdatedAtUnixMs = ref, at
		return incoming, true
	}
	stored.Ref, stored.UpdatedAtUnixMs = ref, at
	return stored, false
}

// Validate checks a head as it travels between stores.
func (h Head) Validate() error {
	if err := h.Ref.Validate(); err != nil {
		return err
	}
	if err := receipt.ValidateSeq("thread_head.seq", h.Seq); err != nil {
		return err
	}
	if err := receipt.ValidateBounded("thread_head.updated_at", h.UpdatedAtUnixMs); err != nil {
		return err
	}
	return receipt.ValidateOptionalID("thread_head.message_id", h.MessageID)
}

// Follow is a versioned register: the greater version wins, a follow over
// an unfollow of the same version (so the order is total).
type Follow struct {
	Following     bool
	VersionUnixMs int64
}

// Compare orders two follow registers.
func (f Follow) Compare(o Follow) int {
	if c := cmp.Compare(f.VersionUnixMs, o.VersionUnixMs); c != 0 {
		return c
	}
	switch {
	case f.Following == o.Following:
		return 0
	case f.Following:
		return 1
	}
	return -1
}

// State is one user's register in one thread.
type State struct {
	Key Key
	// Cursors are the user's thread cursors, with receipt.State's rules
	// (public and private read, epochs, reading implies delivery); their
	// Key is unused.
	Cursors receipt.State
	Follow  Follow
	// Mentions are the reply seqs mentioning the user, the newest cap+1
	// (channel.Mentions' retention), ascending.
	Mentions []int64
}

// Merge is the register's rule: the cursors by receipt.Merge, the greater
// follow register, the mention sets' union kept to the newest cap+1. It
// returns the merged state and whether incoming changed stored.
func Merge(stored, incoming State, mentionCap int) (State, bool) {
	out := State{Key: stored.Key}
	if out.Key == (Key{}) {
		out.Key = incoming.Key
	}
	var moved bool
	out.Cursors, moved = receipt.Merge(stored.Cursors, incoming.Cursors)
	out.Cursors.Key = receipt.Key{}
	out.Follow = stored.Follow
	if incoming.Follow.Compare(stored.Follow) > 0 {
		out.Follow, moved = incoming.Follow, true
	}
	out.Mentions = channel.MergeMentions(stored.Mentions, incoming.Mentions, mentionCap)
	if !slices.Equal(out.Mentions, stored.Mentions) {
		moved = true
	}
	return out, moved
}

// Same reports two registers the stores need not reconcile.
func Same(a, b State) bool {
	return a.Cursors.Canonical().SameCursors(b.Cursors.Canonical()) &&
		a.Follow == b.Follow && slices.Equal(a.Mentions, b.Mentions)
}

// IsZero reports a register that holds nothing.
func (s State) IsZero() bool {
	return s.Cursors.Read.Position.IsZero() && s.Cursors.PrivateRead.Position.IsZero() &&
		s.Cursors.Delivered.Position.IsZero() && s.Follow == (Follow{}) && len(s.Mentions) == 0
}

// Time is when the register last changed as far as it records: the
// cursors' time or the follow's version.
func (s State) Time() int64 { return max(s.Cursors.UpdatedAtUnixMs, s.Follow.VersionUnixMs) }

// Validate checks a register as it travels between stores.
func (s State) Validate() error {
	if err := s.Key.Validate(); err != nil {
		return err
	}
	c := s.Cursors
	c.Key = s.Key.ChannelKey()
	if !c.Read.Position.IsZero() || !c.PrivateRead.Position.IsZero() || !c.Delivered.Position.IsZero() {
		if err := c.Validate(); err != nil {
			return err
		}
	}
	if err := receipt.ValidateBounded("follow.version", s.Follow.VersionUnixMs); err != nil {
		return err
	}
	return channel.ValidateMentionSeqs(s.Mentions)
}

// Active reports whether the follow counts: the user follows the thread,
// is a member of its channel, and followed it at or after their last
// membership change (leaving a channel ends every follow in it; a rejoin
// does not bring them back).
func (s State) Active(m channel.Membership) bool {
	return s.Follow.Following && m.Member && s.Follow.VersionUnixMs >= m.VersionUnixMs
}

// Counts are a user's counts in one thread.
type Counts struct {
	Unread, FirstUnread int64
	Mentions            int64
	MentionsCapped      bool
}

// CountsAt derives the counts from the thread's head seq, as a channel's:
// head minus the effective read, the kept mentions above it.
func (s State) CountsAt(headSeq int64, mentionCap int) Counts {
	var c Counts
	c.Unread, c.FirstUnread = channel.Unread(headSeq, s.Cursors)
	if c.Unread > 0 {
		c.Mentions, c.MentionsCapped = channel.MentionCount(s.Mentions, s.Cursors.EffectiveRead().Seq, mentionCap)
	}
	return c
}

// CountsDeleted is CountsAt less the thread's deleted replies (sorted,
// channel.Deletions with the thread's root): a deleted reply counts
// neither as unread, as the first unread nor as a mention.
func (s State) CountsDeleted(headSeq int64, mentionCap int, deleted []int64) Counts {
	var c Counts
	c.Unread, c.FirstUnread = channel.UnreadDeleted(headSeq, s.Cursors, deleted)
	if c.Unread > 0 {
		c.Mentions, c.MentionsCapped = channel.MentionCountDeleted(s.Mentions, s.Cursors.EffectiveRead().Seq, mentionCap, deleted)
	}
	return c
}

// MarkUnread is the incoming register of a mark-unread from seq by a
// client that saw the read epoch seenEpoch: the user's private thread read
// moves to seq-1 at the next epoch (receipt.MarkUnread); the public thread
// read others see does not move.
func MarkUnread(k Key, seq, seenEpoch int64) State {
	out := State{Key: k, Cursors: receipt.MarkUnread(receipt.Key{}, seq, seenEpoch)}
	return out
}
