package settings

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
)

// randomSettings draws a register over few users and versions, so that
// ties meet and the tie rule (share less, then the quieter level)
// decides.
func randomSettings(r *rand.Rand) any {
	return privacy.Settings{User: "u" + strconv.Itoa(r.IntN(3)), ShareRead: r.IntN(2) == 0, ShareDelivered: r.IntN(2) == 0,
		VersionMs: 1 + r.Int64N(5), DefaultLevel: notification.Level(r.IntN(4))}
}

// The kind passes the conformance suite: its rule obeys the merge laws,
// and merge.lua and upsert.sql keep what privacy.Merge keeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	env := kindtest.Env(t)
	kindtest.MergeLaws(t, Kind, env, randomSettings)
	kindtest.StoresAgree(t, Kind, env, randomSettings)
}
