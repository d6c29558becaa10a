package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// UsedMemory is the server's used_memory (INFO memory), in bytes.
func UsedMemory(ctx context.Context, t testing.TB, rdb *redis.Client) int64 {
	info, err := rdb.Info(ctx, "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no used_memory in INFO memory")
	return 0
}

// SettledUsedMemory reads used_memory once the server is idle enough that
// two reads 200 ms apart agree within 4 kB (other clients' buffers move
// it): the memory tests' measure of what their keys cost.
func SettledUsedMemory(ctx context.Context, t testing.TB, rdb *redis.Client) int64 {
	prev := UsedMemory(ctx, t, rdb)
	for range 20 {
		time.Sleep(200 * time.Millisecond)
		cur := UsedMemory(ctx, t, rdb)
		if d := cur - prev; d > -4096 && d < 4096 {
			return cur
		}
		prev = cur
	}
	return prev
}
