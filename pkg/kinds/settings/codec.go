package settings

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
)

// A register's value in the user's Redis hash: "R D VERSION_MS" (R, D
// "1" share or "0" not; decimal version), then " L" when the default
// notification level L is set (merge.lua reads the same).

func encode(st privacy.Settings) string {
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	v := b(st.ShareRead) + " " + b(st.ShareDelivered) + " " + strconv.FormatInt(st.VersionMs, 10)
	if st.DefaultLevel != notification.Unset {
		v += " " + strconv.Itoa(int(st.DefaultLevel))
	}
	return v
}

// decode reads user's settings from their value; a value that does not
// decode, or names an unknown level, is an error.
func decode(user, v string) (privacy.Settings, error) {
	f := strings.Fields(v)
	if len(f) != 3 && len(f) != 4 {
		return privacy.Settings{}, fmt.Errorf("settings of %s: %q: want 3 or 4 fields", user, v)
	}
	ver, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return privacy.Settings{}, fmt.Errorf("settings of %s: %q: %w", user, v, err)
	}
	st := privacy.Settings{User: user, ShareRead: f[0] == "1", ShareDelivered: f[1] == "1", VersionMs: ver}
	if len(f) == 4 {
		l, err := strconv.Atoi(f[3])
		if err != nil || !notification.Level(l).Valid() {
			return privacy.Settings{}, fmt.Errorf("settings of %s: %q: bad level", user, v)
		}
		st.DefaultLevel = notification.Level(l)
	}
	return st, nil
}
