package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

// TestPipelineConverges runs the binaries, sends a randomized workload with
// duplicates and reordering from several concurrent clients (gRPC and
// Connect JSON), waits for quiet, and asserts for every key:
// Postgres = Redis = the greatest value acknowledged.
func TestPipelineConverges(t *testing.T) {
	// With the spool, as kafkagate runs in production: its metrics are
	// among those the dashboard reads.
	s := newStack(t, stackOptions{spool: true})
	m := newModel()
	d := startDriver(s.apiAddr, workload{clients: 6, users: 40, channels: 12, batch: 20, dup: 0.2, reorder: 0.15}, m, 1)
	waitAcked(t, m, 5000, 90*time.Second)
	d.halt()
	acked := m.snapshot()
	require.Greater(t, len(acked), 100, "the workload acknowledged too little (%d errors)", d.errs.Load())

	took, v := s.waitConverged(context.Background(), acked, 60*time.Second)
	require.Zero(t, v.lost, "lost acknowledged writes: %s", v.firstProblem)
	require.Zero(t, v.diverged, "redis and postgres disagree: %s", v.firstProblem)
	t.Logf("%d events acknowledged over %d keys; converged %s after the load stopped", m.n, v.keys, took.Round(time.Millisecond))

	// Every service's metrics, after real traffic, follow the convention.
	s.scrapeMetrics(t)

	// The checker itself must be able to fail: move one key backwards in
	// Postgres behind the max-merge's back and delete another from Redis.
	// The reconciler stops first: its drift sweep (every 2s here) repairs
	// exactly these two faults, and could do so between the plant and the
	// check.
	s.reconciler.stop()
	ctx := context.Background()
	var victim, gone receipt.Key
	for k, st := range acked {
		if st.Read.Position.Seq > 1 && victim == (receipt.Key{}) {
			victim = k
		} else if k != victim && gone == (receipt.Key{}) {
			gone = k
		}
	}
	_, err := s.store.Pool().Exec(ctx, `UPDATE read_receipts SET read_seq = 1 WHERE user_id = $1 AND channel_id = $2`, victim.User, victim.Channel)
	require.NoError(t, err)
	require.NoError(t, s.rdb.HDel(ctx, cursors.NewStore(s.rstore).RedisKey(gone.User), gone.Channel).Err())
	// And a kind the model does not track: a settings row only Postgres
	// holds.
	_, err = settings.NewStore(s.store, nil).WritePG(ctx, []privacy.Settings{{User: gone.User, ShareRead: false, ShareDelivered: true, VersionMs: 1}})
	require.NoError(t, err)
	v, err = s.check(ctx, acked)
	require.NoError(t, err)
	require.Equal(t, 2, v.lost, "the checker must see a regressed Postgres row and a missing Redis field: %s", v.firstProblem)
	require.Positive(t, v.diverged, "the checker must see the settings only Postgres holds")
}

// TestSamplerCountsRegressions proves the fault suite's regression counter
// counts: a store answering lower than before is one regression, a store
// answering the same or higher is none.
func TestSamplerCountsRegressions(t *testing.T) {
	t.Parallel()
	smp := &sampler{}
	k := receipt.Key{User: "u", Channel: "c"}
	at := func(seq int64) []receipt.State {
		c := receipt.Cursor{Position: receipt.Position{Seq: seq}}
		return []receipt.State{{Key: k, Read: c, Delivered: c}}
	}
	seen := map[receipt.Key]receipt.State{}
	smp.observe(seen, at(5))
	smp.observe(seen, at(5))
	smp.observe(seen, at(9))
	require.Zero(t, smp.regressed.Load())
	smp.observe(seen, at(7))
	require.EqualValues(t, 1, smp.regressed.Load())
}
