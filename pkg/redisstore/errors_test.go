package redisstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)

	// A command error from the server: repeating cannot help.
	require.NoError(t, rdb.Set(ctx, prefix+"str", "x", 0).Err())
	err := rdb.HGet(ctx, prefix+"str", "f").Err()
	require.Error(t, err)
	require.Equal(t, errclass.Permanent, redisstore.Classify(err), "WRONGTYPE: %v", err)
	// A script error is the command's fault too.
	err = rdb.Eval(ctx, "return redis.call('NOSUCHCOMMAND')", nil).Err()
	require.Equal(t, errclass.Permanent, redisstore.Classify(err), "%v", err)
	// A script the server lost is reloaded: transient.
	err = rdb.EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err()
	require.Equal(t, errclass.Unavailable, redisstore.Classify(err), "NOSCRIPT: %v", err)

	// A server that does not answer: try again later.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer func() { _ = down.Close() }()
	err = down.Ping(ctx).Err()
	require.Error(t, err)
	require.Equal(t, errclass.Unavailable, redisstore.Classify(fmt.Errorf("wrapped: %w", err)), "%v", err)

	require.Equal(t, errclass.None, redisstore.Classify(nil))
	require.Equal(t, errclass.None, redisstore.Classify(redis.Nil))
	require.Equal(t, errclass.Canceled, redisstore.Classify(context.Canceled))
	require.Equal(t, errclass.Unavailable, redisstore.Classify(context.DeadlineExceeded))
}
