package notifications

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// randomRegister draws a register over few keys, and few versions,
// levels and mute ends, so that ties meet.
func randomRegister(r *rand.Rand) any {
	k := receipt.Key{User: "u" + strconv.Itoa(r.IntN(2)), Channel: "c" + strconv.Itoa(r.IntN(2))}
	return notification.Register{Key: k, Level: notification.Level(r.IntN(4)),
		MutedUntilUnixMs: r.Int64N(3) * 1000, VersionUnixMs: 1 + r.Int64N(4)}
}

// The kind passes the conformance suite: its rule obeys the merge laws,
// and merge.lua and upsert.sql keep what notification.Merge keeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	env := kindtest.Env(t)
	kindtest.MergeLaws(t, Kind, env, randomRegister)
	kindtest.StoresAgree(t, Kind, env, randomRegister)
}
