package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// A master with one replica: a wait returns once the replica took the
// writes (asked for more than there are, it waits for those there); with
// the replica hung every key lags, within the timeout, with an error;
// with the replica gone there is nothing a failover could lose to, and
// nothing to wait for.
func TestWaitReplicasSingleNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master, replica := redistest.StartWithReplica(t)
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.New(rdb, redisstore.Config{Prefix: "wait:"})
	keys := []string{s.Prefix() + "k:{alice}", s.Prefix() + "k:{bob}"}

	// n = 0 waits for nothing.
	lagging, err := s.WaitReplicas(ctx, keys, 0, time.Second)
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, lagging)

	require.NoError(t, rdb.HSet(ctx, keys[0], "c", "1").Err())
	lagging, err = s.WaitReplicas(ctx, keys, 2, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, lagging)
	rr := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { _ = rr.Close() })
	require.Equal(t, "1", rr.HGet(ctx, keys[0], "c").Val(), "what the wait confirmed is on the replica")

	replica.Pause(t)
	require.NoError(t, rdb.HSet(ctx, keys[1], "c", "2").Err())
	began := time.Now()
	lagging, err = s.WaitReplicas(ctx, keys, 1, 100*time.Millisecond)
	require.Error(t, err, "the replica is hung")
	require.ErrorIs(t, err, redisstore.ErrUnavailable)
	require.Equal(t, []bool{true, true}, lagging)
	require.Less(t, time.Since(began), 5*time.Second, "the wait is bounded by its timeout")

	replica.Resume(t)
	replica.Stop()
	require.Eventually(t, func() bool {
		lagging, err := s.WaitReplicas(ctx, keys, 1, 100*time.Millisecond)
		return err == nil && !lagging[0] && !lagging[1]
	}, 10*time.Second, 50*time.Millisecond, "no replica connected: nothing to wait for")
}

// A Redis Cluster with one replica a master: keys on every master are
// confirmed by their own node's replica.
func TestWaitReplicasCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartReplicatedCluster(t, 3, 1)
	cfg := redisstore.ClientConfig{Mode: redisstore.ModeCluster, Addrs: c.Addrs[:1], Prefix: "wait:"}
	rdb, err := cfg.NewClient()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	s := redisstore.New(rdb, cfg.StoreConfig())
	var keys []string
	for i := range 30 {
		keys = append(keys, s.Prefix()+"k:{user"+strconv.Itoa(i)+"}")
		require.NoError(t, s.Client().HSet(ctx, keys[i], "c", "1").Err())
	}
	lagging, err := s.WaitReplicas(ctx, keys, 1, 5*time.Second)
	require.NoError(t, err)
	require.NotContains(t, lagging, true)
}
