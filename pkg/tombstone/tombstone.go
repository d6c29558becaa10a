// Package tombstone holds the erasure rules: a user's tombstone is a
// max-register over its generation, and an event is dropped when it
// predates the user's latest erasure. Every store and every path that
// writes a user's state from an event (persister, dead-letter repair,
// drift sweep) applies the same function, Drops.
package tombstone

import (
	"fmt"
	"time"

	"github.com/readstate/receipts/pkg/receipt"
)

// ClockSkew bounds the clock difference between the gateway replicas that
// stamp accepted_at on events and the one that erased the user: an event
// accepted up to ClockSkew after the erasure's time and not stamped with
// the erasure's generation is still taken for one that predates it.
const ClockSkew = 2 * time.Second

// Tombstone records a user's latest erasure.
type Tombstone struct {
	User string
	// Generation grows with every erasure of the user (NextGeneration);
	// events the gateway accepted after the erasure carry it.
	Generation int64
	// ErasedAtUnixMs is the erasing gateway's clock at the erasure.
	ErasedAtUnixMs int64
}

// IsZero reports whether t is "never erased".
func (t Tombstone) IsZero() bool { return t.Generation == 0 }

// Merge is the max-register: the greater generation wins (ties: the later
// time), so erasures applied in any order, any number of times, converge.
// advanced reports whether inc changed stored.
func Merge(stored, inc Tombstone) (merged Tombstone, advanced bool) {
	if inc.Generation > stored.Generation ||
		(inc.Generation == stored.Generation && inc.ErasedAtUnixMs > stored.ErasedAtUnixMs) {
		return inc, true
	}
	return stored, false
}

// NextGeneration is the generation of a new erasure: the erasure time in
// milliseconds, or one more than the stored generation when that is not
// less. Time-based, so a store that lost its copy of the tombstone (a
// Redis FLUSHALL) still hands out a generation above every earlier one.
func NextGeneration(stored, nowMs int64) int64 {
	return max(stored+1, nowMs)
}

// Drops reports whether an event of the user, accepted at acceptedAtMs,
// predates the erasure t and must not be written. A stamped event carries
// the generation the gateway read where the event's Redis write ran (0:
// never erased): that order alone decides, whatever the clocks say — the
// event is dropped when it read a generation below the erasure's. An
// unstamped event (the gateway could read the generation neither in
// Redis nor in Postgres, or an older build stamped none) is dropped
// unless it was accepted more than ClockSkew after the erasure.
func (t Tombstone) Drops(gen int64, stamped bool, acceptedAtMs int64) bool {
	switch {
	case t.IsZero() || gen >= t.Generation:
		return false
	case stamped:
		return true
	}
	return acceptedAtMs <= t.ErasedAtUnixMs+ClockSkew.Milliseconds()
}

// Predates reports whether a stored value of the user, last changed at
// updatedAtMs, may predate the erasure t (stored values carry no
// generation): the drift sweep and the repairs do not copy such a value
// from one store to the other.
func (t Tombstone) Predates(updatedAtMs int64) bool {
	return !t.IsZero() && updatedAtMs <= t.ErasedAtUnixMs+ClockSkew.Milliseconds()
}

// MaxGenerationLead bounds how far a generation may be ahead of its
// erasure's time. A gateway hands out max(stored + 1, its clock in ms,
// Postgres' + 1): a generation is its erasure's time, or one more than
// an erasure's of the same milliseconds. A generation far ahead would
// make every later write of the user be dropped as older than the
// erasure, for as long as the lead.
const MaxGenerationLead int64 = 24 * 60 * 60 * 1000

// Validate checks a tombstone as it travels: a valid user id, a
// generation of 1 … receipt.MaxSeq at most MaxGenerationLead ahead of its
// time, a time of 0 … receipt.MaxSeq.
func (t Tombstone) Validate() error {
	if err := receipt.ValidateID("user_id", t.User); err != nil {
		return err
	}
	if err := receipt.ValidateSeq("erased_generation", t.Generation); err != nil {
		return err
	}
	if err := receipt.ValidateBounded("accepted_at_unix_ms", t.ErasedAtUnixMs); err != nil {
		return err
	}
	if t.Generation > t.ErasedAtUnixMs+MaxGenerationLead {
		return &receipt.FieldError{Field: "erased_generation", Reason: fmt.Sprintf("%d is more than %d ahead of the erasure's time %d", t.Generation, MaxGenerationLead, t.ErasedAtUnixMs)}
	}
	return nil
}

// Next is the generation after gen, saturating at receipt.MaxSeq.
func Next(gen int64) int64 { return min(gen+1, receipt.MaxSeq) }

// Set is the tombstones of some users, by user id.
type Set map[string]Tombstone

// Add merges t into the set.
func (s Set) Add(t Tombstone) { s[t.User], _ = Merge(s[t.User], t) }

// Drops applies Tombstone.Drops for user (no tombstone: nothing dropped).
func (s Set) Drops(user string, gen int64, stamped bool, acceptedAtMs int64) bool {
	t, ok := s[user]
	return ok && t.Drops(gen, stamped, acceptedAtMs)
}
