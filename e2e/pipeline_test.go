package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPipelineConverges runs the binaries, sends a randomized workload with
// duplicates and reordering from several concurrent clients (gRPC and
// Connect JSON), waits for quiet, and asserts for every key:
// Postgres = Redis = the greatest value acknowledged.
func TestPipelineConverges(t *testing.T) {
	s := newStack(t, stackOptions{})
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
}
