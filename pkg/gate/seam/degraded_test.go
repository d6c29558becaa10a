package seam

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// duringPipelines runs fn once, inside the first pipeline sent after it
// is armed: a write noted degraded while a settle's unload is under way.
type duringPipelines struct {
	trips
	fn func()
}

func (d *duringPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if fn := d.fn; fn != nil {
			d.fn = nil
			fn()
		}
		return next(ctx, cmds)
	}
}

// A settle takes its fence, then unloads: a degraded write noted after
// the fence is not below it, so the user stays degraded for a settle with
// a fence after that write (else the next restore, waiting for the first
// fence only, could read Postgres without it and the next answer would be
// below the degraded one).
func TestASettleDoesNotTakeAWriteNotedAfterItsFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	rs := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	g := &Core{Redis: rs}
	g.Restore = newRestorer(g, RestoreConfig{}, prometheus.NewRegistry())
	hook := &duringPipelines{}
	rdb.AddHook(hook)

	g.Restore.NoteDegraded([]string{"u1", "u2"})
	require.True(t, g.Restore.IsDegraded("u1"))
	hook.fn = func() { g.Restore.NoteDegraded([]string{"u1"}) }
	require.NoError(t, g.Restore.SettleDegradedNow(ctx, []string{"u1", "u2"}))
	require.Nil(t, hook.fn, "the write was noted during the unload")
	require.True(t, g.Restore.IsDegraded("u1"), "a write noted after the settle's fence keeps its user degraded")
	require.False(t, g.Restore.IsDegraded("u2"), "a user with nothing noted since is settled")

	require.NoError(t, g.Restore.SettleDegradedNow(ctx, []string{"u1"}))
	require.False(t, g.Restore.IsDegraded("u1"), "the next settle, with a fence after it, settles it")
}
