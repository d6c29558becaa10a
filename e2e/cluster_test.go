package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/redistest"
)

// TestRedisClusterFailover runs the three binaries on a Redis Cluster of
// their own (3 masters, 3 replicas): marks, message notices (counts), a
// watch stream and the linearizability workload go on while a master is
// killed and its replica promoted, with the reconciler's drift sweep and
// without it. Once quiet: nothing acknowledged is lost or regressed, the
// marks, mark-unreads and reads are linearizable, both stores agree on
// every kind, the counts match the notice model, and the watch stream
// (the gateway's cluster reader) still delivers.
func TestRedisClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the binaries")
	}
	for _, sweep := range []bool{true, false} {
		name := "sweep"
		if !sweep {
			name = "no sweep"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clusterFailover(t, sweep)
		})
	}
}

func clusterFailover(t *testing.T, sweep bool) {
	c := redistest.StartReplicatedCluster(t, 3, 1)
	// Each mark and mark-unread waits for its replica (WAIT), so that the
	// failover loses no answered read.
	s := newStack(t, stackOptions{spool: true, redisCluster: c, noSweep: !sweep, extraGateArgs: []string{"--redis-replica-acks", "1"}})
	m := newModel()
	lz := startLinearizer(s.apiAddr, linearDefault, 11)
	d := startDriver(s.apiAddr, workload{clients: 4, users: 40, channels: 10, batch: 20, dup: 0.2, reorder: 0.15}, m, 7)
	smp := startSampler(s, m)
	nt := startNoticer(s.apiAddr, noticeLoad{channels: 6, users: 20, clients: 2}, nil, 7)
	// A small channel whose member reads while its watch stream is open.
	watched := startReader(t, s.apiAddr, "w")
	events := watchSSE(t, s.apiAddr, "w")
	waitAcked(t, m, 2000, 60*time.Second)
	require.Eventually(t, func() bool { return events.Load() > 1 }, 30*time.Second, 50*time.Millisecond,
		"the watch stream delivers moves on the cluster (beyond its snapshot)")

	// Kill a master that holds slots, wait for its replica to take over.
	victim := masterWithSlots(t, c)
	before := m.n
	for _, srv := range c.Servers {
		if srv.Addr == victim {
			srv.Stop()
		}
	}
	waitClusterOK(t, c, victim)
	seen := events.Load()
	waitAcked(t, m, before+2000, 120*time.Second)
	lz.waitOps(t, lz.recorded()+linearAfterFault, 120*time.Second)
	require.Eventually(t, func() bool { return events.Load() > seen }, 60*time.Second, 50*time.Millisecond,
		"the watch stream delivers after the failover")
	lv := lz.finish()
	t.Logf("linearizability: %s; %d calls, %d failed, %d degraded", lv, lz.calls.Load(), lz.failed.Load(), lz.degraded.Load())
	require.True(t, lv.ok(), "marks, mark-unreads and reads are not linearizable across the failover: %s", lv)
	d.halt()
	nt.halt()
	watched()
	if !sweep {
		require.Zero(t, s.sweepOnce(t), "the sweep after the load repaired Postgres from Redis")
	}
	acked := m.snapshot()
	took, v := s.waitConverged(context.Background(), acked, 120*time.Second)
	smp.halt()
	require.Zero(t, v.lost, "lost: %s", v.firstProblem)
	require.Zero(t, v.diverged, "diverged: %s", v.firstProblem)
	require.Zero(t, smp.regressed.Load(), "regressed")
	require.Eventually(t, func() bool {
		n, _, err := nt.check(context.Background(), s.store)
		return err == nil && n == 0
	}, 60*time.Second, 250*time.Millisecond, "counts match the notice model")
	t.Logf("%d events acknowledged (%d spooled, %d failed calls) over %d keys; a master killed; converged %s after the load stopped",
		m.n, d.spooled.Load(), d.errs.Load(), v.keys, took.Round(time.Millisecond))
}

// startReader joins a member to channel ch, then posts messages and marks
// them read one by one, over REST, until the returned stop is called.
func startReader(t *testing.T, api, ch string) (stop func()) {
	post := func(method, path, body string) error {
		req, _ := http.NewRequest(method, "http://"+api+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: %s", method, path, resp.Status)
		}
		return nil
	}
	require.NoError(t, post(http.MethodPut, "/v1/channels/"+ch+"/members/reader", `{}`))
	done, halted := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(halted)
		for seq := 1; ; seq++ {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			// Failures (Redis failing over) are retried with the next seq.
			if post(http.MethodPost, "/v1/channels/"+ch+"/messages", fmt.Sprintf(`{"seq":%d,"message_id":"m%d","sender_id":"writer"}`, seq, seq)) == nil {
				_ = post(http.MethodPost, "/v1/users/reader/channels/"+ch+"/read", fmt.Sprintf(`{"seq":%d,"message_id":"m%d"}`, seq, seq))
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-halted }) }
	t.Cleanup(stop)
	return stop
}

// watchSSE follows a channel's watch stream for the test's lifetime,
// reopening it when it ends, and counts the events it receives.
func watchSSE(t *testing.T, api, channel string) *atomic.Int64 {
	var n atomic.Int64
	var last atomic.Value
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("watch stream of %s: %d events; last: %v", channel, n.Load(), last.Load())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+api+"/v1/channels:watch?channel_id="+channel, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				last.Store("request: " + err.Error())
			}
			if err == nil {
				last.Store("status " + resp.Status)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "data:") {
						n.Add(1)
					}
				}
				last.Store(fmt.Sprintf("status %s, stream ended: %v", resp.Status, sc.Err()))
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // reopen after an error
			}
		}
	}()
	return &n
}

// masters lists the addresses of the masters that serve slots.
func masters(ctx context.Context, addr string) ([]string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sh := range shards {
		if len(sh.Slots) == 0 {
			continue
		}
		for _, n := range sh.Nodes {
			if n.Role == "master" && n.Health == "online" {
				out = append(out, fmt.Sprintf("%s:%d", n.IP, n.Port))
			}
		}
	}
	return out, nil
}

// masterWithSlots returns the address of a master that serves slots.
func masterWithSlots(t *testing.T, c *redistest.Cluster) string {
	ms, err := masters(context.Background(), c.Addrs[0])
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	return ms[0]
}

// waitClusterOK waits until every surviving node reports the cluster ok
// with three masters serving slots, none of them the dead node.
func waitClusterOK(t *testing.T, c *redistest.Cluster, dead string) {
	var last string
	ok := assert.Eventually(t, func() bool {
		for _, a := range c.Addrs {
			if a == dead {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			rdb := redis.NewClient(&redis.Options{Addr: a})
			info, err := rdb.ClusterInfo(ctx).Result()
			_ = rdb.Close()
			ms, err2 := masters(ctx, a)
			cancel()
			if err != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") || len(ms) != 3 || slices.Contains(ms, dead) {
				last = fmt.Sprint(a, err, err2, ms)
				return false
			}
		}
		return true
	}, 60*time.Second, 250*time.Millisecond, "failover")
	require.True(t, ok, "no failover: last seen %s", last)
}
