package persister

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The linger stays at its floor up to a fifth of LingerMaxRate, rises
// linearly to LingerMax at LingerMaxRate and stays there; a LingerMax not
// above Linger, or no linger, turns it off.
func TestLingerFollowsTheRate(t *testing.T) {
	t.Parallel()
	c := Config{Linger: 20 * time.Millisecond, LingerMax: 220 * time.Millisecond, LingerMaxRate: 50_000}
	for rate, want := range map[float64]time.Duration{
		0: 20 * time.Millisecond, 10_000: 20 * time.Millisecond, 30_000: 120 * time.Millisecond,
		50_000: 220 * time.Millisecond, 1e9: 220 * time.Millisecond,
	} {
		require.Equal(t, want, c.lingerAt(rate), "rate %v", rate)
	}
	c.LingerMax = c.Linger
	require.Equal(t, 20*time.Millisecond, c.lingerAt(1e9), "fixed")
	c.Linger = -1
	require.Equal(t, time.Duration(-1), c.lingerAt(1e9), "none")
	d := Config{}.withDefaults()
	require.Equal(t, d.Linger, d.lingerAt(d.LingerMaxRate/5), "the defaults keep a light load's linger")
	require.Equal(t, LingerMaxDefault, d.lingerAt(LingerMaxRateDefault))
}

// The meter reads the records of the last whole second, and 0 after a
// pause longer than two.
func TestRateMeter(t *testing.T) {
	t.Parallel()
	var r rateMeter
	t0 := time.Unix(1000, 0)
	r.add(100, t0)
	require.Zero(t, r.perSecond(), "no whole second yet")
	r.add(400, t0.Add(500*time.Millisecond))
	r.add(10, t0.Add(time.Second))
	require.InDelta(t, 500, r.perSecond(), 0.01)
	r.add(1, t0.Add(4*time.Second))
	require.Zero(t, r.perSecond(), "a pause resets it")
}
