package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/redistest"
)

// keySlot agrees with the server's CLUSTER KEYSLOT (a cluster-enabled
// node answers it before it joins a cluster) on hash tags of every shape.
func TestKeySlot(t *testing.T) {
	t.Parallel()
	require.Equal(t, uint16(0x31C3), crc16("123456789"), "the specification's check value")
	port := redistest.FreePort(t)
	srv := redistest.StartServer(t, port, nil, "--cluster-enabled", "yes")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	for _, k := range []string{"", "a", "receipts:u:{alice}", "u:{}x", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "receipts:t:{alice}", "x{y", "é{ü}"} {
		want, err := rdb.ClusterKeySlot(context.Background(), k).Result()
		require.NoError(t, err)
		require.Equal(t, int(want), keySlot(k), k)
	}
}
