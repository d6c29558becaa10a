package notification_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

var k = receipt.Key{User: "u1", Channel: "c1"}

func merge(a, b notification.Register) notification.Register {
	m, _ := notification.Merge(a, b)
	return m
}

func random(rng *rand.Rand) notification.Register {
	return notification.Register{Key: k, Level: notification.Level(rng.IntN(4)),
		MutedUntilUnixMs: rng.Int64N(3), VersionUnixMs: rng.Int64N(3)}
}

// The merge laws: idempotent, commutative, associative, with the zero
// register as identity, so every store converges whatever the order.
func TestMergeLaws(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 5))
	zero := notification.Register{Key: k}
	for range 2000 {
		a, b, c := random(rng), random(rng), random(rng)
		require.Equal(t, a, merge(a, a), "idempotent")
		require.Equal(t, merge(a, b), merge(b, a), "commutative")
		require.Equal(t, merge(merge(a, b), c), merge(a, merge(b, c)), "associative")
		require.Equal(t, a, merge(zero, a), "zero is the identity")
	}
}

func TestNewerVersionWinsAndTieKeepsQuieter(t *testing.T) {
	t.Parallel()
	old := notification.Register{Key: k, Level: notification.None, VersionUnixMs: 10}
	newer := notification.Register{Key: k, Level: notification.All, VersionUnixMs: 11}
	m, changed := notification.Merge(newer, old)
	require.False(t, changed, "a late older update does not undo a newer one")
	require.Equal(t, newer, m)
	tie := notification.Register{Key: k, Level: notification.Mentions, VersionUnixMs: 11}
	require.Equal(t, tie, merge(newer, tie))
}

func TestEffectiveAndCounts(t *testing.T) {
	t.Parallel()
	r := notification.Register{Key: k, MutedUntilUnixMs: 100}
	l, muted := r.Effective(notification.Unset, 99)
	require.Equal(t, notification.All, l, "unset everywhere is all")
	require.True(t, muted)
	l, muted = r.Effective(notification.Mentions, 100)
	require.Equal(t, notification.Mentions, l, "an unset channel takes the user's default")
	require.False(t, muted, "a mute ends at its instant")
	r.Level = notification.None
	l, _ = r.Effective(notification.Mentions, 0)
	require.Equal(t, notification.None, l, "the channel's level beats the default")

	for _, c := range []struct {
		l                notification.Level
		muted            bool
		unread, mentions bool
	}{
		{notification.All, false, true, true},
		{notification.All, true, false, true},
		{notification.Mentions, false, false, true},
		{notification.Mentions, true, false, true},
		{notification.None, false, false, false},
	} {
		u, m := notification.Counts(c.l, c.muted)
		require.Equal(t, [2]bool{c.unread, c.mentions}, [2]bool{u, m}, "%v muted=%v", c.l, c.muted)
	}
}

func TestParseAndValidate(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "all", "mentions", "none"} {
		l, ok := notification.Parse(s)
		require.True(t, ok)
		require.Equal(t, s, l.String())
	}
	_, ok := notification.Parse("loud")
	require.False(t, ok)
	good := notification.Register{Key: k, Level: notification.All, VersionUnixMs: 1}
	require.NoError(t, good.Validate())
	bad := good
	bad.MutedUntilUnixMs = -1
	require.Error(t, bad.Validate())
	bad = good
	bad.Level = 9
	require.Error(t, bad.Validate())
	bad = good
	bad.VersionUnixMs = 0
	require.Error(t, bad.Validate())
}
