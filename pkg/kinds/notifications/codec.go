package notifications

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// A register's value in the user's Redis hash: "LEVEL MUTED_UNTIL_MS
// VERSION_MS", decimal (registers.lua reads the same).

func encode(r notification.Register) string {
	return strconv.Itoa(int(r.Level)) + " " + strconv.FormatInt(r.MutedUntilUnixMs, 10) + " " + strconv.FormatInt(r.VersionUnixMs, 10)
}

// decode reads k's register from its value; a value that does not
// decode, or a register that does not validate, is an error.
func decode(k receipt.Key, v string) (notification.Register, error) {
	f := strings.Fields(v)
	if len(f) != 3 {
		return notification.Register{}, fmt.Errorf("notifications of %s: %q: want 3 fields", k.KafkaKey(), v)
	}
	l, err1 := strconv.Atoi(f[0])
	m, err2 := strconv.ParseInt(f[1], 10, 64)
	ver, err3 := strconv.ParseInt(f[2], 10, 64)
	r := notification.Register{Key: k, Level: notification.Level(l), MutedUntilUnixMs: m, VersionUnixMs: ver}
	if err1 != nil || err2 != nil || err3 != nil || r.Validate() != nil {
		return notification.Register{}, fmt.Errorf("notifications of %s: %q: invalid", k.KafkaKey(), v)
	}
	return r, nil
}
