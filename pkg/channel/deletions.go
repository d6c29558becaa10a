package channel

import (
	"fmt"
	"slices"

	"github.com/readstate/receipts/pkg/receipt"
)

// Deletions are the deleted message seqs of a channel: a grow-only set
// (merge = union), so a delete that arrives before its message's notice,
// twice, or in any order still applies. A deleted seq never counts as
// unread, as the first unread seq or as a mention; the head, the cursors
// and the read-by of other messages are unchanged.
//
// Retention: every store keeps the seqs within DeletionWindow of the
// set's greatest seq (Retain), so a channel holds at most DeletionWindow
// of them. The window commutes with the union (a seq kept by the union's
// window is kept by its own part's, whose greatest seq is no greater), so
// stores that trim at different moments converge. A deletion older than
// the window counts again for a reader whose read cursor is below it:
// a reader more than DeletionWindow messages behind.
//
// A thread's deleted replies are the same set keyed by the thread's root
// (Root > 0; 0 is the channel itself): reply seqs, counted against the
// thread's head and cursors by the same rule.
//
// Redis (Lua), the persister's dedupe and Postgres (SQL) each apply this
// rule; the kinds' differential test holds them to MergeDeletions.
type Deletions struct {
	Channel string
	// Root is the thread root's channel seq (0: the channel's messages).
	Root int64
	// Seqs ascending, distinct.
	Seqs []int64
	// UpdatedAtUnixMs is when the gateway accepted the deletions (0: a
	// set read back from a store, which keeps no time).
	UpdatedAtUnixMs int64
}

// DeletionWindow bounds a channel's deletions: the seqs more than this
// below its greatest deletion are dropped (DeletionsRetain).
const DeletionWindow = 1_000_000

// DeletionLead is how far beyond the channel's (or thread's) head a
// deleted seq may be: a delete may arrive before its message's notice,
// not a hundred thousand messages before it. The gateway refuses a
// deletion further ahead (DELETION_BEYOND_HEAD), so the window, kept
// below the greatest deletion, always holds the deletions of the last
// DeletionWindow − DeletionLead seqs below the head: one huge seq (a
// foreign id space, a typo) cannot push the channel's deletions out.
//
// The window is kept relative to the greatest deletion, not to the head
// itself, because every store trims with what it holds: the deletion
// set's own greatest seq is in the set (the trim commutes with the
// union), while a head travels as another kind and may reach a store
// later than the deletions it bounds.
const DeletionLead = 100_000

// SetDigest summarises a deletion set within its window: how many seqs,
// the least and the greatest (zero: no set). The drift sweep compares
// the stores' digests before it reads a set.
type SetDigest struct{ Count, Least, Greatest int64 }

// Digest is the digest of sorted, distinct seqs, within the window.
func Digest(sorted []int64) SetDigest {
	kept := DeletionsRetain(sorted)
	if len(kept) == 0 {
		return SetDigest{}
	}
	return SetDigest{Count: int64(len(kept)), Least: kept[0], Greatest: kept[len(kept)-1]}
}

// MaxDeletedSeqs bounds the deleted seqs of one event (a notice batch is
// cut into events of at most this many per channel).
const MaxDeletedSeqs = 256

// MergeDeletions is the union of two seq sets within the window, sorted
// ascending, without duplicates. Sorted, distinct inputs (as every store
// keeps them) merge in one linear pass; others are sorted first.
func MergeDeletions(a, b []int64) []int64 {
	if len(a)+len(b) == 0 {
		return nil
	}
	if !sortedDistinct(a) {
		a = slices.Compact(slices.Sorted(slices.Values(a)))
	}
	if !sortedDistinct(b) {
		b = slices.Compact(slices.Sorted(slices.Values(b)))
	}
	// Only the part above the greater top's floor can survive the window.
	top := int64(0)
	if len(a) > 0 {
		top = a[len(a)-1]
	}
	if len(b) > 0 {
		top = max(top, b[len(b)-1])
	}
	floor := top - DeletionWindow
	ia, _ := slices.BinarySearch(a, floor+1)
	ib, _ := slices.BinarySearch(b, floor+1)
	a, b = a[ia:], b[ib:]
	out := make([]int64, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// SettleDeletions is MergeDeletions of any number of sets at once, given
// their concatenation: sorted, without duplicates, within the window. It
// sorts seqs in place.
func SettleDeletions(seqs []int64) []int64 {
	if len(seqs) == 0 {
		return nil
	}
	if !sortedDistinct(seqs) {
		slices.Sort(seqs)
		seqs = slices.Compact(seqs)
	}
	return DeletionsRetain(seqs)
}

func sortedDistinct(s []int64) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}

// DeletionsRetain keeps the sorted, distinct seqs above the greatest
// minus DeletionWindow.
func DeletionsRetain(sorted []int64) []int64 {
	if len(sorted) == 0 {
		return sorted
	}
	floor := sorted[len(sorted)-1] - DeletionWindow
	i, _ := slices.BinarySearch(sorted, floor+1)
	return sorted[i:]
}

// Validate checks deletions as they travel between stores.
func (d Deletions) Validate() error {
	if err := receipt.ValidateID("channel_id", d.Channel); err != nil {
		return err
	}
	if d.Root < 0 {
		return &receipt.FieldError{Field: "thread_root_seq", Reason: "is negative"}
	}
	if len(d.Seqs) == 0 {
		return &receipt.FieldError{Field: "deleted_seqs", Reason: "is empty"}
	}
	if len(d.Seqs) > MaxDeletedSeqs {
		return &receipt.FieldError{Field: "deleted_seqs", Reason: fmt.Sprintf("has %d seqs; the limit is %d", len(d.Seqs), MaxDeletedSeqs)}
	}
	for i, s := range d.Seqs {
		if err := receipt.ValidateSeq(fmt.Sprintf("deleted_seqs[%d]", i), s); err != nil {
			return err
		}
	}
	if d.UpdatedAtUnixMs < 0 {
		return &receipt.FieldError{Field: "accepted_at_unix_ms", Reason: "is negative"}
	}
	return nil
}

// DeletedIn counts the deleted seqs in (read, head] of a sorted set.
func DeletedIn(deleted []int64, read, head int64) int64 {
	if head <= read {
		return 0
	}
	lo, _ := slices.BinarySearch(deleted, read+1)
	hi, _ := slices.BinarySearch(deleted, head+1)
	return int64(hi - lo)
}

// UnreadDeleted is Unread less the deleted seqs: head minus the effective
// read seq minus the deletions in between, and the first seq above the
// read that is not deleted (0 when nothing is unread). Stores that count
// deletions apart (a Redis ZCOUNT) combine them with Unread by
// AfterDeletions; this is the rule they are held to.
func UnreadDeleted(headSeq int64, st receipt.State, deleted []int64) (count, firstUnread int64) {
	read := st.EffectiveRead().Seq
	count, _ = Unread(headSeq, st)
	if count == 0 {
		return 0, 0
	}
	first := read + 1
	i, _ := slices.BinarySearch(deleted, first)
	for ; i < len(deleted) && deleted[i] == first; i++ {
		first++
	}
	return AfterDeletions(count, first, DeletedIn(deleted, read, headSeq))
}

// AfterDeletions is an unread count and first unread seq with deleted
// seqs of (read, head] taken out: firstKept is the first seq above the
// read that is not deleted.
func AfterDeletions(count, firstKept, deleted int64) (int64, int64) {
	count -= deleted
	if count <= 0 {
		return 0, 0
	}
	return count, firstKept
}

// MentionCountDeleted is MentionCount of the kept seqs that are not
// deleted.
func MentionCountDeleted(kept []int64, readSeq int64, cap int, deleted []int64) (count int64, capped bool) {
	for _, s := range kept {
		if _, found := slices.BinarySearch(deleted, s); s > readSeq && !found {
			count++
		}
	}
	return count, count > int64(cap)
}
