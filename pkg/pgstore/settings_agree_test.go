package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
)

// TestAgreeSetting: the first value is stored, the same one agrees, another
// one is refused.
func TestAgreeSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	require.NoError(t, s.AgreeSetting(ctx, pgstore.SettingDetailThreshold, 50))
	require.NoError(t, s.AgreeSetting(ctx, pgstore.SettingDetailThreshold, 50))
	err := s.AgreeSetting(ctx, pgstore.SettingDetailThreshold, 20)
	require.ErrorIs(t, err, pgstore.ErrSettingDisagrees)
	require.ErrorContains(t, err, "20 here and 50 in Postgres")
}
