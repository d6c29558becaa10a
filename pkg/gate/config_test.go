package gate

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestNewReportsEveryBadField(t *testing.T) {
	t.Parallel()
	_, err := New(Config{
		Topic:          "bad topic",
		ProduceTimeout: 100 * time.Millisecond,
		MaxBatchItems:  -1,
		MaxBodyBytes:   10,
		RedisTimeout:   -time.Second,
	})
	require.Error(t, err)
	for _, want := range []string{
		"Redis: a client is required",
		"Postgres: a store is required",
		`Topic: "bad topic" is not a Kafka topic name`,
		"ProduceTimeout: 100ms is below kgo's minimum",
		"MaxBatchItems: must be >= 1, got -1",
		"MaxBodyBytes: must be within [1KiB, 64MiB], got 10",
		"RedisTimeout: must be positive",
	} {
		require.ErrorContains(t, err, want)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Config{Redis: redis.NewClient(&redis.Options{})}.withDefaults()
	require.Equal(t, AddrDefault, c.Addr)
	require.Equal(t, TopicDefault, c.Topic)
	require.Equal(t, 5*time.Second, c.ProduceTimeout)
	require.Equal(t, 500*time.Millisecond, c.RedisTimeout)
	require.Equal(t, 500, c.MaxBatchItems)
	require.Equal(t, 500, c.MaxReadChannels)
	require.Equal(t, int64(1<<20), c.MaxBodyBytes)
	require.Greater(t, c.WriteTimeout, c.ProduceTimeout+c.RedisTimeout)
	require.NotNil(t, c.Logger)
	require.NotNil(t, c.Registerer)
	// Only the missing Postgres store is wrong with the defaults.
	require.EqualError(t, c.validate(), "Postgres: a store is required")
}
