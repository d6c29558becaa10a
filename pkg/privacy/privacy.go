// Package privacy holds a user's receipt-sharing settings and their merge
// rule: a versioned register, the newer version wins, so updates applied
// in any order, any number of times, by any store converge.
package privacy

import "github.com/readstate/receipts/pkg/notification"

// Settings is what a user shares with the other members of their channels.
type Settings struct {
	User string
	// ShareRead: the user's public reads appear in read-by, ticks, watch
	// streams and the change feed. ShareDelivered: the same for delivery.
	ShareRead, ShareDelivered bool
	// DefaultLevel is the notification level of the user's channels
	// without their own (Unset reads as notification.All).
	DefaultLevel notification.Level
	// VersionMs orders updates (the accepting gateway's clock); 0 is the
	// default, which every update beats.
	VersionMs int64
}

// Default is the settings of a user who never changed them: share both.
func Default(user string) Settings {
	return Settings{User: user, ShareRead: true, ShareDelivered: true}
}

// Shares reports whether the user shares the kind ("r" read, "d" delivered).
func (s Settings) Shares(kind string) bool {
	if kind == "r" {
		return s.ShareRead
	}
	return s.ShareDelivered
}

// Merge keeps the greater version; on a tie the one sharing less wins
// (read first, then delivered), then the quieter default level, so that the order of arrival never
// decides and a tie never leaks. advanced reports whether inc won.
func Merge(stored, inc Settings) (merged Settings, advanced bool) {
	if compare(inc, stored) > 0 {
		return inc, true
	}
	return stored, false
}

func compare(a, b Settings) int {
	switch {
	case a.VersionMs != b.VersionMs:
		if a.VersionMs > b.VersionMs {
			return 1
		}
		return -1
	case a.ShareRead != b.ShareRead:
		if !a.ShareRead {
			return 1
		}
		return -1
	case a.ShareDelivered != b.ShareDelivered:
		if !a.ShareDelivered {
			return 1
		}
		return -1
	case a.DefaultLevel != b.DefaultLevel:
		if a.DefaultLevel > b.DefaultLevel {
			return 1
		}
		return -1
	}
	return 0
}
