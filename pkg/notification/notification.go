// Package notification holds a user's notification register in a channel
// and its merge rule: a versioned register, the greater version wins and a
// tie is broken by the values, so updates applied in any order, any number
// of times, by any store converge. The Redis script, the Postgres upsert
// and Merge apply the same rule; pkg/kinds' differential test holds the
// three to it on the same random histories.
package notification

import (
	"github.com/readstate/receipts/pkg/receipt"
)

// Level is how much of a channel counts for the user.
type Level int8

// The levels. Unset defers to the user's default level (the settings
// register). The order is the tie-break's: a tie keeps the quieter.
const (
	Unset    Level = 0
	All      Level = 1
	Mentions Level = 2
	None     Level = 3
)

var names = [...]string{Unset: "", All: "all", Mentions: "mentions", None: "none"}

// String is the level's API name ("" when unset).
func (l Level) String() string {
	if l < Unset || l > None {
		return "invalid"
	}
	return names[l]
}

// Parse reads an API name; "" is Unset.
func Parse(s string) (Level, bool) {
	for l, n := range names {
		if n == s {
			return Level(l), true
		}
	}
	return Unset, false
}

// Valid reports whether l is one of the levels.
func (l Level) Valid() bool { return l >= Unset && l <= None }

// Register is a user's notification state in a channel.
type Register struct {
	Key   receipt.Key
	Level Level
	// MutedUntilUnixMs silences the channel until then (0: not muted).
	MutedUntilUnixMs int64
	// VersionUnixMs orders updates: the Redis server's clock when the
	// update was accepted (never a gateway's), so gateways with skewed
	// clocks still order one user's updates as they happened.
	VersionUnixMs int64
}

// IsZero reports whether the register was never written.
func (r Register) IsZero() bool {
	return r.Level == Unset && r.MutedUntilUnixMs == 0 && r.VersionUnixMs == 0
}

// Compare orders registers by version, then by level (the quieter
// greater), then by mute end: a total order, so no store's result
// depends on the order of arrival.
func (r Register) Compare(o Register) int {
	switch {
	case r.VersionUnixMs != o.VersionUnixMs:
		return cmpInt(r.VersionUnixMs, o.VersionUnixMs)
	case r.Level != o.Level:
		return cmpInt(int64(r.Level), int64(o.Level))
	}
	return cmpInt(r.MutedUntilUnixMs, o.MutedUntilUnixMs)
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

// Merge keeps the greater register (equal ones: stored) under stored's
// key. It returns the merged register and whether incoming changed it.
func Merge(stored, incoming Register) (Register, bool) {
	return receipt.MergeRegister(stored, incoming, func(r *Register) *receipt.Key { return &r.Key })
}

// Validate checks a register as it travels between stores.
func (r Register) Validate() error {
	if err := receipt.ValidateID("user_id", r.Key.User); err != nil {
		return err
	}
	if err := receipt.ValidateID("channel_id", r.Key.Channel); err != nil {
		return err
	}
	if !r.Level.Valid() {
		return &receipt.FieldError{Field: "level", Reason: "is unknown"}
	}
	if err := receipt.ValidateBounded("muted_until_unix_ms", r.MutedUntilUnixMs); err != nil {
		return err
	}
	if r.VersionUnixMs <= 0 {
		return &receipt.FieldError{Field: "notifications", Reason: "has no version"}
	}
	if err := receipt.ValidateBounded("notifications.version", r.VersionUnixMs); err != nil {
		return err
	}
	return nil
}

// Effective is what counts for a channel: its level, else the user's
// default (Unset defaults to All), and whether a mute is in force at nowMs.
func (r Register) Effective(userDefault Level, nowMs int64) (Level, bool) {
	l := r.Level
	if l == Unset {
		l = userDefault
	}
	if l == Unset {
		l = All
	}
	return l, r.MutedUntilUnixMs > nowMs
}

// Counts says what of a channel's unread enters the user's badge at an
// effective level and mute: its unread messages only at All and not
// muted; its mentions at All or Mentions, muted or not (as a muted
// channel in Slack still shows a mention), never at None.
func Counts(l Level, muted bool) (unread, mentions bool) {
	return l == All && !muted, l == All || l == Mentions
}
