package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// A bounded client gives up on a Redis that never answers at its bound,
// a command and a pipeline alike, though the caller set no deadline.
func TestBoundEndsEveryRoundTrip(t *testing.T) {
	t.Parallel()
	rdb, err := redisstore.ClientConfig{URL: "redis://" + redistest.Hung(t) + "/0?max_retries=-1"}.NewClient()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	redisstore.Bound(rdb, 50*time.Millisecond)

	ctx := context.Background()
	began := time.Now()
	require.Error(t, rdb.Get(ctx, "k").Err())
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "a")
		p.Get(ctx, "b")
		return nil
	})
	require.Error(t, err)
	// go-redis alone waits its read timeout, 5 s, for each.
	require.Less(t, time.Since(began), 3*time.Second)
}
