// Package channel holds the rules of the channel-wide state and of a
// user's place in a channel, beside the cursors of pkg/receipt: the channel
// head (a max-register), the membership (a versioned register), the
// mentions (a set kept to its newest MentionCap+1 seqs) and the unread and
// mention counts derived from them. Like pkg/receipt it imports no store:
// Redis (Lua), the persister's dedupe and Postgres (SQL) each apply these
// rules, and the tests hold them to these functions.
package channel

import (
	"fmt"
	"slices"

	"github.com/readstate/receipts/pkg/receipt"
)

// Head is a channel's head: the greatest message seq notified, with its
// message id. Sequences are dense per channel (the upstream's counter), so
// the unread count of a user is Seq minus the user's read seq.
type Head struct {
	Channel   string
	Seq       int64
	MessageID string
	// UpdatedAtUnixMs is when the head last advanced.
	UpdatedAtUnixMs int64
}

// MergeHead is the head's max-register: the greater seq wins, with its
// message id and time; a tie keeps stored (so a duplicate is a no-op). It
// returns the merged head and whether incoming advanced it.
func MergeHead(stored, incoming Head) (Head, bool) {
	if incoming.Seq > stored.Seq {
		if stored.Channel != "" {
			incoming.Channel = stored.Channel
		}
		incoming.UpdatedAtUnixMs = max(incoming.UpdatedAtUnixMs, stored.UpdatedAtUnixMs)
		return incoming, true
	}
	if stored.Channel == "" {
		stored.Channel = incoming.Channel
	}
	return stored, false
}

// Validate checks a head as it travels between stores.
func (h Head) Validate() error {
	if err := receipt.ValidateID("channel_id", h.Channel); err != nil {
		return err
	}
	if err := receipt.ValidateSeq("head.seq", h.Seq); err != nil {
		return err
	}
	if err := receipt.ValidateBounded("head.updated_at", h.UpdatedAtUnixMs); err != nil {
		return err
	}
	return receipt.ValidateOptionalID("head.message_id", h.MessageID)
}

// Membership is the versioned register of one user in one channel. The
// register with the greater version wins (see Compare), so a late or
// replayed join or leave never undoes a newer one.
type Membership struct {
	Key    receipt.Key
	Member bool
	// VersionSeq and VersionUnixMs order the changes: the channel seq at
	// which the change happened (the head then), then the time.
	VersionSeq    int64
	VersionUnixMs int64
	// JoinSeq is the join point of the last join: the user had read the
	// channel up to there when joining (a join raises the user's private
	// read cursor to it, so history is not unread).
	JoinSeq int64
}

// Compare orders two registers: by version (VersionSeq, VersionUnixMs),
// then — for two different changes with the same version, which the
// versions alone would leave to arrival order — a join after a leave, then
// the greater join point. The tie-breaks make the order total, so every
// store ends with the same register whatever the order of arrival.
func (m Membership) Compare(o Membership) int {
	switch {
	case m.VersionSeq != o.VersionSeq:
		return cmpInt(m.VersionSeq, o.VersionSeq)
	case m.VersionUnixMs != o.VersionUnixMs:
		return cmpInt(m.VersionUnixMs, o.VersionUnixMs)
	case m.Member != o.Member:
		if m.Member {
			return 1
		}
		return -1
	}
	return cmpInt(m.JoinSeq, o.JoinSeq)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// IsZero reports whether the register was never written.
func (m Membership) IsZero() bool {
	return !m.Member && m.VersionSeq == 0 && m.VersionUnixMs == 0 && m.JoinSeq == 0
}

// MergeMembership keeps the greater register (equal ones: stored). It
// returns the merged register and whether incoming changed it.
func MergeMembership(stored, incoming Membership) (Membership, bool) {
	return receipt.MergeRegister(stored, incoming, func(m *Membership) *receipt.Key { return &m.Key })
}

// Validate checks a register as it travels between stores.
func (m Membership) Validate() error {
	if err := receipt.ValidateID("user_id", m.Key.User); err != nil {
		return err
	}
	if err := receipt.ValidateID("channel_id", m.Key.Channel); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"membership.version_seq", m.VersionSeq}, {"membership.version_unix_ms", m.VersionUnixMs}, {"membership.join_seq", m.JoinSeq}} {
		if err := receipt.ValidateBounded(f.name, f.v); err != nil {
			return err
		}
	}
	if m.VersionSeq == 0 && m.VersionUnixMs == 0 {
		return &receipt.FieldError{Field: "membership", Reason: "has no version"}
	}
	return nil
}

// Join is the register of a join at version (seq, ms) with its join point.
func Join(k receipt.Key, versionSeq, versionMs, joinSeq int64) Membership {
	return Membership{Key: k, Member: true, VersionSeq: versionSeq, VersionUnixMs: versionMs, JoinSeq: joinSeq}
}

// Leave is the register of a leave at version (seq, ms). It keeps no join
// point: a later join starts at the head then.
func Leave(k receipt.Key, versionSeq, versionMs int64) Membership {
	return Membership{Key: k, VersionSeq: versionSeq, VersionUnixMs: versionMs}
}

// JoinRead is the incoming state a join applies to the user's cursors:
// the private read cursor raised to the join point (at the current epoch,
// receipt.EpochCurrent, which the real-time store resolves), so the history
// before the join is not unread for the user, while nobody sees the user
// as having read it.
func JoinRead(m Membership) receipt.State {
	return receipt.State{Key: m.Key, PrivateRead: receipt.Cursor{Position: receipt.Position{Epoch: receipt.EpochCurrent, Seq: m.JoinSeq}}}
}

// MentionCapDefault is the default mention cap: counts above it show as
// "100+".
const MentionCapDefault = 100

// MaxMentionSeqs bounds the mention seqs of one event.
const MaxMentionSeqs = 128

// Mentions are the message seqs mentioning a user in a channel.
//
// Retention: every store keeps, per (user, channel), the newest cap+1
// seqs, not trimming below the read cursor. That keeps every count exact
// up to "more than cap": the mentions above any read seq are the newest
// ones, so if there are at most cap+1 of them all are kept, and if there
// are more, cap+1 are — enough to say "cap+". And a mark-unread, which
// moves the user's own read back, finds the mentions above its new position
// still there, so they count again. (Trimming below the read cursor would
// drop exactly those.) The newest cap+1 of a union is the newest cap+1 of
// the parts' newest cap+1, so the retention commutes with the set union:
// stores that trim at different moments still converge.
type Mentions struct {
	Key  receipt.Key
	Seqs []int64
}

// MergeMentions is the union of two seq sets kept to the newest cap+1,
// sorted ascending, without duplicates.
func MergeMentions(a, b []int64, cap int) []int64 {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := make([]int64, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.Sort(out)
	out = slices.Compact(out)
	return Retain(out, cap)
}

// Retain keeps the newest cap+1 of sorted, distinct seqs.
func Retain(sorted []int64, cap int) []int64 {
	if keep := cap + 1; len(sorted) > keep {
		return sorted[len(sorted)-keep:]
	}
	return sorted
}

// ValidateMentionSeqs checks the seqs of one event: > 0, at most
// MaxMentionSeqs.
func ValidateMentionSeqs(seqs []int64) error {
	if len(seqs) > MaxMentionSeqs {
		return &receipt.FieldError{Field: "mention_seqs", Reason: fmt.Sprintf("has %d seqs; the limit is %d", len(seqs), MaxMentionSeqs)}
	}
	for i, s := range seqs {
		if err := receipt.ValidateSeq(fmt.Sprintf("mention_seqs[%d]", i), s); err != nil {
			return err
		}
	}
	return nil
}

// MentionCount counts the kept seqs above the read seq; capped is true when
// there are more than cap (the count is then cap+1, shown as "cap+").
func MentionCount(kept []int64, readSeq int64, cap int) (count int64, capped bool) {
	for _, s := range kept {
		if s > readSeq {
			count++
		}
	}
	return count, count > int64(cap)
}

// Unread is a user's unread count in a channel: head minus the effective
// read seq (the greater of the public and private read cursors), never
// below 0, and the first unread seq (0 when nothing is unread). Sequences
// are dense per channel, so the count is exact.
func Unread(headSeq int64, st receipt.State) (count, firstUnread int64) {
	read := st.EffectiveRead().Seq
	if headSeq <= read {
		return 0, 0
	}
	return headSeq - read, read + 1
}
