package apiauth

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLimiterPerClient(t *testing.T) {
	t.Parallel()
	evicted := 0
	lt := newLimiterTable(10, 20, 100, time.Minute, func() { evicted++ })
	now := time.Unix(1000, 0)

	wait, err := lt.take("a", 20, now)
	require.NoError(t, err)
	require.Zero(t, wait, "a full burst fits")
	wait, err = lt.take("a", 5, now)
	require.NoError(t, err)
	require.Equal(t, 500*time.Millisecond, wait, "5 events at 10/s")
	wait, err = lt.take("b", 20, now)
	require.NoError(t, err)
	require.Zero(t, wait, "another client has its own bucket")

	// A refusal spends nothing: after the wait it says, the call fits.
	wait, err = lt.take("a", 5, now.Add(500*time.Millisecond))
	require.NoError(t, err)
	require.Zero(t, wait)

	_, err = lt.take("a", 21, now)
	require.ErrorContains(t, err, "a call of 21 events exceeds the burst of 20")
	require.Zero(t, evicted)
}

// TestLimiterEvicts: the table never holds more than its bound; idle
// clients go first, then the least recently seen.
func TestLimiterEvicts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		evicted := 0
		lt := newLimiterTable(0.001, 1, 3, time.Minute, func() { evicted++ })
		for i := range 3 {
			_, err := lt.take(fmt.Sprint("c", i), 1, time.Now())
			require.NoError(t, err)
			time.Sleep(time.Second) // fake time: orders lastSeen
		}
		require.Equal(t, 3, lt.size())

		// Full, nobody idle: the least recently seen (c0) goes.
		_, err := lt.take("c3", 1, time.Now())
		require.NoError(t, err)
		require.Equal(t, 3, lt.size())
		require.Equal(t, 1, evicted)
		wait, err := lt.take("c1", 1, time.Now())
		require.NoError(t, err)
		require.NotZero(t, wait, "c1 was kept: its empty bucket still refuses")
		wait, err = lt.take("c0", 1, time.Now())
		require.NoError(t, err)
		require.Zero(t, wait, "c0 was evicted: it starts with a full bucket")
		require.Equal(t, 2, evicted, "taking c0 back evicted another")

		// Idle clients are swept once an idle period has passed.
		time.Sleep(2 * time.Minute)
		_, err = lt.take("fresh", 1, time.Now())
		require.NoError(t, err)
		require.Equal(t, 1, lt.size(), "every client idle for over a minute was dropped")
		require.Equal(t, 5, evicted)
	})
}
