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

// The mention cap too: every store keeps the newest cap+1 mentions, so a
// gateway with another cap than the deployment's refuses to start.
func TestMentionCapMustAgree(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.MentionCap = 7 }})
	ctx := context.Background()
	require.NoError(t, tb.schema.Store.AgreeSetting(ctx, pgstore.SettingMentionCap, 100)) // the persister's
	err := tb.gate.AgreeSettings(ctx)
	require.ErrorIs(t, err, pgstore.ErrSettingDisagrees)
	require.ErrorContains(t, err, "mention_cap is 7 here and 100 in Postgres")
}
