package persister_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
)

// TestDetailThresholdMustAgree: the detail threshold is stored once for
// the deployment; a persister configured with another one than the
// gateway stored refuses to run.
func TestDetailThresholdMustAgree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.schema.Store.AgreeSetting(context.Background(), pgstore.SettingDetailThreshold, 20)) // the gateway's

	requireRefused(t, b, "50 here and 20 in Postgres")

	cfg := b.config(prometheus.NewRegistry())
	cfg.DetailThreshold = 20
	r := b.start(cfg)
	require.Eventually(t, func() bool { return r.p.Ready(context.Background()) == nil }, waitFor, 20*time.Millisecond)
}

// TestMentionCapMustAgree: the mention cap is stored once as well.
func TestMentionCapMustAgree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.schema.Store.AgreeSetting(context.Background(), pgstore.SettingMentionCap, 7)) // the gateway's

	requireRefused(t, b, "mention_cap is 100 here and 7 in Postgres")
}

// requireRefused runs a persister of b's default config and expects it
// to refuse the deployment's settings with the message part want.
func requireRefused(t *testing.T, b *bundle, want string) {
	t.Helper()
	p, err := persister.New(b.config(prometheus.NewRegistry()))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = p.Run(ctx)
	require.ErrorIs(t, err, pgstore.ErrSettingDisagrees)
	require.ErrorContains(t, err, want)
}
