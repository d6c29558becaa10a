package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
)

// Each class from a real server: an answered error that is not the data's
// fault is permanent (waiting cannot help), a closed port is unavailable,
// a cancelled caller is neither.
func TestClassifyAgainstTheServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	_, err := s.Pool().Exec(ctx, `SELECT * FROM no_such_table`)
	require.Equal(t, errclass.Permanent, pgstore.Classify(err), "%v", err)

	missing, err := pgstore.Open(ctx, pgstore.Config{URL: "postgres://postgres@127.0.0.1:5432/receipts_no_such_db?sslmode=disable"})
	require.NoError(t, err)
	defer missing.Close()
	_, err = missing.Migrate(ctx)
	require.ErrorIs(t, err, pgstore.ErrPermanent)
	require.Equal(t, errclass.Permanent, pgstore.Classify(err), "%v", err)

	down, err := pgstore.Open(ctx, pgstore.Config{URL: "postgres://postgres@127.0.0.1:1/receipts?sslmode=disable"})
	require.NoError(t, err)
	defer down.Close()
	err = down.Ping(ctx)
	require.ErrorIs(t, err, pgstore.ErrUnavailable)
	require.Equal(t, errclass.Unavailable, pgstore.Classify(err), "%v", err)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = s.Ping(cctx)
	require.Equal(t, errclass.Canceled, pgstore.Classify(err), "%v", err)
	require.Equal(t, errclass.None, pgstore.Classify(nil))
}
