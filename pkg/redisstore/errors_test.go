package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)

	// A command error from the server: repeating cannot help.
	require.NoError(t, rdb.Set(ctx, prefix+"str", "x", 0).Err())
	err := rdb.HGet(ctx, prefix+"str", "f").Err()
	require.Error(t, err)
	require.False(t, redisstore.IsRetryable(err), "WRONGTYPE: %v", err)

	// A server that does not answer: try again later.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer down.Close()
	err = down.Ping(ctx).Err()
	require.Error(t, err)
	require.True(t, redisstore.IsRetryable(err), "%v", err)

	require.False(t, redisstore.IsRetryable(nil))
	require.False(t, redisstore.IsRetryable(redis.Nil))
	require.False(t, redisstore.IsRetryable(context.Canceled))
	require.True(t, redisstore.IsRetryable(context.DeadlineExceeded))
}
