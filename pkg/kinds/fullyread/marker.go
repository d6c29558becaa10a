package fullyread

import (
	"cmp"
	"strings"

	"github.com/readstate/receipts/pkg/receipt"
)

// Ref is where a marker sits: a user's channel (Root 0) or a thread of it
// (Root the thread's root seq).
type Ref struct {
	Key  receipt.Key
	Root int64
}

// Compare orders refs as fully_read's primary key: user, channel, root.
func (r Ref) Compare(o Ref) int {
	if c := r.Key.Compare(o.Key); c != 0 {
		return c
	}
	return cmp.Compare(r.Root, o.Root)
}

// Marker is a user's fully-read marker (Matrix's m.fully_read): the
// message up to which the user has seen everything, synced across the
// user's devices. It is private (nobody else reads it), counts in no
// unread number and moves apart from the read cursor.
type Marker struct {
	Ref
	Seq       int64
	MessageID string
	// UpdatedAtUnixMs is when the marker was set (the gateway's clock).
	UpdatedAtUnixMs int64
}

// Order orders markers of one ref: by seq, then time, then message id
// (by length, then bytes: the order the Lua and the SQL compare in too).
func Order(a, b Marker) int {
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	if c := cmp.Compare(a.UpdatedAtUnixMs, b.UpdatedAtUnixMs); c != 0 {
		return c
	}
	if c := cmp.Compare(len(a.MessageID), len(b.MessageID)); c != 0 {
		return c
	}
	return strings.Compare(a.MessageID, b.MessageID)
}

// Merge is the marker's rule, a max-register: the greater marker by
// Order wins (commutative, associative, idempotent). It reports whether
// b moved a.
func Merge(a, b Marker) (Marker, bool) {
	if Order(b, a) > 0 {
		return b, true
	}
	return a, false
}

// Validate checks a marker's bounds: its ids, a root and a seq within
// receipt.MaxSeq (a seq of at least 1), a time within it too.
func (m Marker) Validate() error {
	if err := receipt.ValidateID("user_id", m.Key.User); err != nil {
		return err
	}
	if err := receipt.ValidateID("channel_id", m.Key.Channel); err != nil {
		return err
	}
	if err := receipt.ValidateOptionalID("message_id", m.MessageID); err != nil {
		return err
	}
	if err := receipt.ValidateSeq("seq", m.Seq); err != nil {
		return err
	}
	if m.Root != 0 {
		if err := receipt.ValidateSeq("thread_root_seq", m.Root); err != nil {
			return err
		}
	}
	if m.UpdatedAtUnixMs < 1 || m.UpdatedAtUnixMs > receipt.MaxSeq {
		return &receipt.FieldError{Field: "updated_at_unix_ms", Reason: "must be between 1 and 9007199254740991"}
	}
	return nil
}
