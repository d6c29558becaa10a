package seam

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestNewReportsEveryBadField(t *testing.T) {
	t.Parallel()
	_, err := New(Config{
		MaxBatchItems: -1,
		RedisTimeout:  -time.Second,
	})
	require.Error(t, err)
	for _, want := range []string{
		"Redis: a client is required",
		"Postgres: a store is required",
		"Producer: a producer is required",
		"MaxBatchItems: must be >= 1, got -1",
		"RedisTimeout: must be positive",
	} {
		require.ErrorContains(t, err, want)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Config{Redis: redis.NewClient(&redis.Options{})}.withDefaults()
	require.Equal(t, 500*time.Millisecond, c.RedisTimeout)
	require.Equal(t, 500, c.MaxBatchItems)
	require.Equal(t, 500, c.MaxReadChannels)
	require.NotNil(t, c.Logger)
	require.NotNil(t, c.Registerer)
	// Only the missing Postgres store and producer are wrong with the
	// defaults.
	require.EqualError(t, c.validate(), "Postgres: a store is required\nProducer: a producer is required")
}
