package gate_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// A failover to a replica that missed the last write: the replica's link
// to the master delivers nothing while a mark of 9 is answered, then the master dies and the replica is
// promoted with the user's hash at 5, still marked loaded. Without replica
// acks the read after the failover answers 5, below what was acknowledged;
// with them the mark was answered realtime_degraded (the replica never
// took it), the user is restored past the mark's fence, and the read
// answers 9.
func TestFailoverToAReplicaThatMissedAWrite(t *testing.T) {
	t.Parallel()
	for _, acks := range []int{0, 1} {
		name := map[int]string{0: "without acks", 1: "with acks"}[acks]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := startReplicatedPair(t, acks, time.Second)
			tb, link := p.tb, p.link
			startPersister(t, tb)
			require.False(t, tb.markRead(t, "gus", "c", 5).GetRealtimeDegraded())
			link.freeze() // the link stays up; what the master sends goes nowhere
			r := tb.markRead(t, "gus", "c", 9)
			require.Equal(t, receiptsv1.Durability_KAFKA, r.GetDurability(), "the mark is durable either way")
			require.Equal(t, acks > 0, r.GetRealtimeDegraded(), "with acks, the hung replica's silence degrades the answer")

			p.failOver(t, "gus")
			var rs receiptsv1.GetReadStateResponse
			tb.doProto(t, http.MethodGet, "/v1/users/gus/read-state", "", &rs)
			require.Len(t, rs.GetChannels(), 1)
			got := rs.GetChannels()[0].GetRead().GetPosition().GetSeq()
			if acks == 0 {
				require.EqualValues(t, 5, got, "the hazard this guards against: the promoted replica answers below the acknowledged 9")
				return
			}
			require.EqualValues(t, 9, got, "the answer after the failover is never below what was acknowledged")
		})
	}
}

// replicatedPair is a gateway on a master whose replica follows it through
// a link that can be frozen; the gateway's client dials addr, whichever
// node is the master now, as a Sentinel or cluster client would find it.
type replicatedPair struct {
	tb      *testBundle
	link    *link
	master  *redistest.Server
	replica *redis.Client
	addr    *atomic.Value
}

func startReplicatedPair(t *testing.T, acks int, ackTimeout time.Duration) replicatedPair {
	master := redistest.StartServer(t, redistest.FreePort(t), nil)
	link := startLink(t, master.Addr)
	host, port, err := net.SplitHostPort(link.addr)
	require.NoError(t, err)
	replica := redistest.StartServer(t, redistest.FreePort(t), nil, "--replicaof", host, port)
	rr := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { _ = rr.Close() })
	require.Eventually(t, func() bool {
		return strings.Contains(rr.Info(context.Background(), "replication").Val(), "master_link_status:up")
	}, 30*time.Second, 20*time.Millisecond, "the replica syncs through the link")
	addr := &atomic.Value{}
	addr.Store(master.Addr)
	rdb := redis.NewClient(&redis.Options{Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr.Load().(string))
	}})
	t.Cleanup(func() { _ = rdb.Close() })
	tb := setup(t, setupOpts{redis: rdb, restoreTimeout: 30 * time.Second, config: func(c *testConfig) {
		// A healthy replica's ack must not miss the bound on a loaded
		// machine.
		c.ReplicaAcks, c.ReplicaAckTimeout, c.RedisTimeout = acks, ackTimeout, 3*time.Second
	}})
	return replicatedPair{tb: tb, link: link, master: master, replica: rr, addr: addr}
}

// failOver stops the master, promotes the replica, points the gateway at
// it and waits until it answers user's reads.
func (p replicatedPair) failOver(t *testing.T, user string) {
	p.master.Stop()
	require.NoError(t, p.replica.ReplicaOf(context.Background(), "NO", "ONE").Err())
	p.addr.Store(p.replica.Options().Addr)
	require.Eventually(t, func() bool {
		status, _ := p.tb.do(t, http.MethodGet, "/v1/users/"+user+"/read-state", "")
		return status == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the gateway reaches the promoted replica")
}

// While a mark waits for a replica that never takes it, the master holds
// it: a read then must not show it before the mark is answered (after a
// failover to the replica a later read would not), so it waits for the
// mark's wait to end. Once the mark is answered degraded, the user's
// hash is unloaded before Redis answers of it, and the unload too counts
// only once a replica took it: after the failover the promoted replica's
// answer is restored past the mark.
func TestAReadDoesNotShowWhatTheReplicasLack(t *testing.T) {
	t.Parallel()
	p := startReplicatedPair(t, 1, 2*time.Second)
	tb := p.tb
	startPersister(t, tb)
	require.False(t, tb.markRead(t, "ida", "c", 5).GetRealtimeDegraded())
	p.link.freeze()
	marked := make(chan *receiptsv1.ReceiptResult, 1)
	go func() { marked <- tb.markRead(t, "ida", "c", 9) }()
	onMaster := redis.NewClient(&redis.Options{Addr: p.master.Addr})
	t.Cleanup(func() { _ = onMaster.Close() })
	cs := cursors.NewStore(redisstore.New(onMaster, redisstore.Config{Prefix: tb.prefix}))
	require.Eventually(t, func() bool {
		st, _, err := cs.Get(context.Background(), "ida", []string{"c"})
		return err == nil && len(st) == 1 && st[0].Read.Position.Seq == 9
	}, 10*time.Second, 5*time.Millisecond, "the master took the mark of 9")
	var during receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/ida/read-state?channel_id=c", "", &during)
	var r *receiptsv1.ReceiptResult
	select {
	case r = <-marked:
	default:
		require.Fail(t, "a read answered what only the master holds while the mark waited for its replica", "%v", &during)
	}
	require.True(t, r.GetRealtimeDegraded(), "the replica never took the mark")
	require.Len(t, during.GetChannels(), 1)
	require.EqualValues(t, 9, during.GetChannels()[0].GetRead().GetPosition().GetSeq(), "once the mark is acknowledged (degraded), from Postgres")
	// The read after it unloads the user on the master, which the replica
	// does not take either: answered from Postgres, and still unsettled.
	var before receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/ida/read-state", "", &before)
	require.Len(t, before.GetChannels(), 1)
	require.EqualValues(t, 9, before.GetChannels()[0].GetRead().GetPosition().GetSeq(), "the degraded mark, from Postgres")

	p.failOver(t, "ida")
	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/ida/read-state", "", &rs)
	require.Len(t, rs.GetChannels(), 1)
	require.EqualValues(t, 9, rs.GetChannels()[0].GetRead().GetPosition().GetSeq(), "restored past the degraded mark")
}

// link is a TCP relay between a replica and its master that can be
// frozen: its connections stay open and what is sent goes nowhere, as
// over a network that stalls.
type link struct {
	addr   string
	frozen chan struct{}
	once   sync.Once
}

func startLink(t *testing.T, target string) *link {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &link{addr: ln.Addr().String(), frozen: make(chan struct{})}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	relay := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-l.frozen:
				// Read on, deliver nothing, keep the connection open.
				if err != nil {
					return
				}
				continue
			default:
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				if err != io.EOF {
					_ = dst.Close()
				}
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go relay(up, c)
			go relay(c, up)
		}
	}()
	return l
}

func (l *link) freeze() { l.once.Do(func() { close(l.frozen) }) }
