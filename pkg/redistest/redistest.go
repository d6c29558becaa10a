// Package redistest gives each test a Redis client and its own key prefix,
// whose keys are deleted when the test ends. TEST_REDIS_URL selects the
// server (default redis://127.0.0.1:6379/1: logical database 1, so
// tests never walk the dev stack's keys in database 0). Only _test.go files import it.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// URLDefault is the server when TEST_REDIS_URL is unset.
const URLDefault = "redis://127.0.0.1:6379/1"

// URL returns the test Redis URL.
func URL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return URLDefault
}

// Client returns a client for the test server, closed at cleanup.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(URL())
	require.NoError(t, err)
	rdb := redis.NewClient(opt)
	require.NoError(t, rdb.Ping(context.Background()).Err(), "pinging Redis (is it running? see scripts/services.sh)")
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Prefix returns a unique key prefix and deletes its keys at cleanup.
func Prefix(t testing.TB, rdb *redis.Client) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "t" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() { DeletePrefix(context.Background(), rdb, prefix) })
	return prefix
}

// DeletePrefix deletes every key that starts with prefix.
func DeletePrefix(ctx context.Context, rdb *redis.Client, prefix string) {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			rdb.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		rdb.Unlink(ctx, batch...)
	}
}
