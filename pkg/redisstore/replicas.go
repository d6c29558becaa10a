package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis replication is asynchronous: a master killed a moment after a
// write leaves a promoted replica without it, and the replica's hashes
// still say ":loaded", so nothing tells a read that the answer it finds is
// below what was acknowledged. WAIT closes that window for a write: once
// a replica took it, the replica a failover promotes has it (with one
// replica a master; with more, as many as WAIT asked for).
//
// WAIT counts the writes of its own connection, and a cluster routes no
// keyless command, so each node gets, on one connection of its own, a
// small write of a key in the slot of the first key written there, then
// WAIT: the node's replication offset is global, so the replicas' ack of
// that write covers every write the node took before it.

// replicaAckTTL bounds how long the key each wait writes outlives it.
const replicaAckTTL = time.Second

// WaitReplicas waits until n replicas (or all those connected, when fewer)
// of each node that holds one of keys took every write made there before
// the call (Redis WAIT, at most timeout), and reports, per key, whether its node fell short, failed
// or could not be reached (lagging[i]). err is the first failure, for the
// log; a lagging key's write must be treated as one Redis did not take.
func (s *Store) WaitReplicas(ctx context.Context, keys []string, n int, timeout time.Duration) (lagging []bool, err error) {
	lagging = make([]bool, len(keys))
	if n <= 0 || len(keys) == 0 {
		return lagging, nil
	}
	type node struct {
		client *redis.Client
		ackKey string
		idx    []int
	}
	var nodes []*node
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		byClient := map[*redis.Client]*node{}
		for i, k := range keys {
			cl, cerr := c.MasterForKey(ctx, k)
			if cerr != nil {
				lagging[i] = true
				err = cerr
				continue
			}
			nd := byClient[cl]
			if nd == nil {
				nd = &node{client: cl, ackKey: s.prefix + "ra:{" + slotTag(keySlot(k)) + "}"}
				byClient[cl] = nd
				nodes = append(nodes, nd)
			}
			nd.idx = append(nd.idx, i)
		}
	case *redis.Client:
		nd := &node{client: c, ackKey: s.prefix + "ra", idx: make([]int, len(keys))}
		for i := range keys {
			nd.idx[i] = i
		}
		nodes = append(nodes, nd)
	default:
		return lagging, fmt.Errorf("waiting for replicas: a %T is not supported", s.rdb)
	}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, nd := range nodes {
		wg.Go(func() {
			werr := waitNode(ctx, nd.client, nd.ackKey, n, timeout)
			if werr == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, i := range nd.idx {
				lagging[i] = true
			}
			if err == nil {
				err = werr
			}
		})
	}
	wg.Wait()
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return lagging, err
}

// waitNode writes ackKey on a connection of its own to the node of
// client, then waits on it for n of the replicas connected to the node
// (all of them when fewer: a node with none, say a promoted replica whose
// old master is gone, has nothing a failover could lose to).
func waitNode(ctx context.Context, client *redis.Client, ackKey string, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	defer cancel()
	conn := client.Conn()
	defer conn.Close()
	role := redis.NewSliceCmd(ctx, "role")
	if _, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, ackKey, "1", replicaAckTTL)
		return p.Process(ctx, role)
	}); err != nil {
		return fmt.Errorf("waiting for %d replicas: %w", n, err)
	}
	// ROLE on a master: "master", its offset, one entry per connected
	// replica.
	r := role.Val()
	if len(r) < 3 || r[0] != "master" {
		return fmt.Errorf("waiting for %d replicas: the node is not a master (ROLE %v)", n, r)
	}
	replicas, _ := r[2].([]any)
	want := min(n, len(replicas))
	if want == 0 {
		return nil
	}
	got, err := conn.Do(ctx, "wait", want, timeout.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("waiting for %d replicas: %w", want, err)
	}
	if got < int64(want) {
		return fmt.Errorf("%d of %d replicas took the writes within %s", got, want, timeout)
	}
	return nil
}
