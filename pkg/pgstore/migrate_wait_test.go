package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/pgstore"
)

func TestMigrateWhenReachable(t *testing.T) {
	t.Parallel()

	// Postgres answers "database does not exist": waiting cannot help, so it
	// fails at once rather than looping.
	missing, err := pgstore.Open(context.Background(), pgstore.Config{URL: "postgres://postgres@127.0.0.1:5432/receipts_no_such_db?sslmode=disable"})
	require.NoError(t, err)
	defer missing.Close()
	waits := 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = missing.MigrateWhenReachable(ctx, func(error) { waits++ })
	require.Error(t, err)
	require.False(t, pgstore.IsUnreachable(err), "%v", err)
	require.Zero(t, waits)
	require.NoError(t, ctx.Err(), "it must not have waited for the deadline")

	// Nothing listens: it waits, and says so, until the context ends.
	down, err := pgstore.Open(context.Background(), pgstore.Config{URL: "postgres://postgres@127.0.0.1:1/receipts?sslmode=disable"})
	require.NoError(t, err)
	defer down.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel2()
	waits = 0
	_, err = down.MigrateWhenReachable(ctx2, func(err error) {
		require.True(t, pgstore.IsUnreachable(err), "%v", err)
		waits++
	})
	require.Error(t, err)
	require.GreaterOrEqual(t, waits, 1)
}
