package deadletter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/pgstore"
)

// The reconciler's repairs keep the newest cap+1 mentions: it checks its
// mention cap against the deployment's and refuses another.
func TestMentionCapMustAgree(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	ctx := context.Background()
	require.NoError(t, bd.pg.AgreeSetting(ctx, pgstore.SettingMentionCap, 7))
	b := kafkatest.New(t)
	c := startConsumer(t, bd, b, "g-cap", func(c *deadletter.Config) { c.MentionCap = 7 })
	require.NoError(t, c.AgreeSettings(ctx))
	other := setup(t) // a registry of its own
	other.pg = bd.pg
	c = startConsumer(t, other, b, "g-cap2", nil) // the default, 100
	require.ErrorIs(t, c.AgreeSettings(ctx), pgstore.ErrSettingDisagrees)
}
