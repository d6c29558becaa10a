package gate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/pgstore"
)

// TestDetailThresholdMustAgree: the gateway checks its detail threshold
// against the one the deployment stored (the persister's), and refuses to
// start on a disagreement.
func TestDetailThresholdMustAgree(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	require.NoError(t, tb.gate.AgreeSettings(ctx), "the first service stores its value")
	require.NoError(t, tb.schema.Store.AgreeSetting(ctx, pgstore.SettingDetailThreshold, 50), "the gateway stored its default")

	other := setup(t, setupOpts{config: func(c *testConfig) { c.ReadBy.DetailThreshold = 20 }})
	require.NoError(t, other.schema.Store.AgreeSetting(ctx, pgstore.SettingDetailThreshold, 50)) // the persister's
	require.ErrorIs(t, other.gate.AgreeSettings(ctx), pgstore.ErrSettingDisagrees)
}
