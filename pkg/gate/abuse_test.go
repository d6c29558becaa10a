package gate_test

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	memberkind "github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
)

// TestBoundedUnderAbuse is the load test of "secure and bounded by
// default": one client tries to open 10,000 watch streams while another
// hammers the read-by path of a 100,000-member channel whose view must be
// rebuilt from Postgres. The replica keeps its per-client bound (exactly
// MaxStreamsPerClient streams open, every other one refused with
// ResourceExhausted), rebuilds the view once (single-flight, then loaded),
// never reads the large channel's members' cursors, and its heap stays
// flat (bounded by the open streams and one page of a rebuild, not by the
// attempts or the channel's size). It logs the heap and Redis's CPU (the
// server's used_cpu, which other users of a shared Redis add to).
// Skipped with -short: it seeds 100,000 members.
func TestBoundedUnderAbuse(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: seeds 100,000 members")
	}
	t.Parallel()
	tokens := tokenFile(t)
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Server.Auth.TokenFile = tokens }})
	hub := startHub(t, tb.rdb, tb.prefix)
	base, _ := replica(t, tb, hub)
	ctx := context.Background()

	// A 100,000-member channel in Postgres, every member with a read.
	const members, page = 100_000, 5_000
	now := time.Now().UnixMilli()
	for start := 0; start < members; start += page {
		regs := make([]channel.Membership, 0, page)
		states := make([]receipt.State, 0, page)
		for i := start; i < start+page; i++ {
			k := receipt.Key{User: "m" + strconv.Itoa(i), Channel: "huge"}
			regs = append(regs, channel.Join(k, 0, now, 0))
			states = append(states, receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: int64(1 + i%50)}}, UpdatedAtUnixMs: now})
		}
		_, err := memberkind.NewStore(tb.schema.Store, nil).WritePG(ctx, regs)
		require.NoError(t, err)
		_, err = cursors.NewPostgres(tb.schema.Store).Upsert(ctx, states)
		require.NoError(t, err)
	}
	// What autovacuum would do after such a load: without statistics the
	// planner pages the members with a plan that reads every one.
	conn, err := pgx.Connect(ctx, tb.schema.URL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "ANALYZE channel_members, read_receipts, user_settings")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	var rebuilds atomic.Int32
	gate.SetRebuildHook(tb.gate, func() { rebuilds.Add(1) })

	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	redisCPU := func() float64 {
		info, err := tb.rdb.Info(ctx, "cpu").Result()
		require.NoError(t, err)
		var total float64
		for _, line := range strings.Split(info, "\r\n") {
			for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
				if v, ok := strings.CutPrefix(line, f); ok {
					x, _ := strconv.ParseFloat(v, 64)
					total += x
				}
			}
		}
		return total
	}
	heapBefore, cpuBefore, start := heap(), redisCPU(), time.Now()

	var wg sync.WaitGroup
	// Client "chat": 10,000 stream attempts, 50 at a time, each kept open
	// until the end.
	// Clients without a timeout: streams live until the end, and a read
	// may wait for the whole rebuild on a loaded machine.
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &h2}}
	t.Cleanup(h2c.CloseIdleConnections)
	streamer := receiptsv1connect.NewReceiptServiceClient(h2c, base, connect.WithGRPC())
	sctx, stopStreams := context.WithCancel(ctx)
	var opened, refused, other atomic.Int32
	attempts := make(chan int)
	for range 50 {
		wg.Go(func() {
			for i := range attempts {
				req := connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"w" + strconv.Itoa(i%500)}})
				req.Header().Set("Authorization", "Bearer "+tokenChat)
				stream, err := streamer.WatchChannels(sctx, req)
				if err == nil && stream.Receive() {
					opened.Add(1)
					go func() { <-sctx.Done(); _ = stream.Close() }()
					continue
				}
				if err == nil {
					err = stream.Err()
					_ = stream.Close()
				}
				if connect.CodeOf(err) == connect.CodeResourceExhausted && apierr.ReasonOf(err) == apierr.StreamLimit {
					refused.Add(1)
				} else {
					other.Add(1)
					t.Logf("attempt %d: %v", i, err)
				}
			}
		})
	}
	// Client "other": GetTicks and GetMessageReceipts of the huge channel,
	// 8 at a time, until the streams are done.
	reader := receiptsv1connect.NewReceiptServiceClient(h2c, tb.url, connect.WithGRPC()) // tb.gate: the hook counts its rebuilds
	// A rebuild that misses its bounds on a loaded machine (a page past
	// the Postgres timeout) fails its callers with Unavailable, and the
	// next read starts another: counted apart.
	var reads, readErrs, failedRebuilds atomic.Int32
	rctx, stopReads := context.WithCancel(ctx)
	var rg sync.WaitGroup
	for range 8 {
		rg.Go(func() {
			for rctx.Err() == nil {
				req := connect.NewRequest(&receiptsv1.GetTicksRequest{ChannelId: "huge"})
				req.Header().Set("Authorization", "Bearer "+tokenOther)
				resp, err := reader.GetTicks(rctx, req)
				switch {
				case err == nil:
					reads.Add(1)
					if resp.Msg.GetDetailed() || len(resp.Msg.GetMembers()) > 0 || resp.Msg.GetMemberCount() != members {
						readErrs.Add(1)
					}
				case rctx.Err() == nil && connect.CodeOf(err) == connect.CodeUnavailable && apierr.ReasonOf(err) == apierr.Unavailable &&
					strings.Contains(err.Error(), "rebuilding the view"):
					failedRebuilds.Add(1)
				case rctx.Err() == nil:
					readErrs.Add(1)
					t.Logf("GetTicks: %v", err)
				}
			}
		})
	}
	var heapPeak uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for rctx.Err() == nil {
			heapPeak = max(heapPeak, heap())
			time.Sleep(200 * time.Millisecond)
		}
	}()
	for i := range 10_000 {
		attempts <- i
	}
	close(attempts)
	wg.Wait()
	// Keep reading until the rebuild has finished and some reads followed.
	require.Eventually(t, func() bool { return reads.Load() >= 50 }, 60*time.Second, 50*time.Millisecond)
	stopReads()
	rg.Wait()
	<-sampled
	elapsed := time.Since(start)
	cpu := redisCPU() - cpuBefore
	heapAfter := heap()
	stopStreams()
	t.Logf("%d streams opened, %d refused, %d other; %d reads of the huge channel, %d rebuilds; heap in use %d MiB before, peak %d MiB, %d MiB after; Redis CPU %.2fs over %s (%.0f%% of a core)",
		opened.Load(), refused.Load(), other.Load(), reads.Load(), rebuilds.Load(), heapBefore>>20, heapPeak>>20, heapAfter>>20, cpu, elapsed.Round(time.Millisecond), 100*cpu/elapsed.Seconds())

	require.Equal(t, int32(100), opened.Load(), "exactly MaxStreamsPerClient streams")
	require.Equal(t, int32(10_000-100), refused.Load(), "every other attempt refused")
	require.Zero(t, other.Load())
	require.Zero(t, readErrs.Load(), "the huge channel answers counts (or fails with its rebuild)")
	t.Logf("%d reads failed with their rebuild", failedRebuilds.Load())
	require.LessOrEqual(t, rebuilds.Load(), 1+failedRebuilds.Load(), "one rebuild at a time, shared, then loaded")
	require.Less(t, heapPeak, heapBefore+64<<20, "heap bounded: %d MiB before, peak %d MiB", heapBefore>>20, heapPeak>>20)
	views, err := readby.NewStore(nil, tb.store).ReadUpTo(ctx, []string{"huge"}, 0)
	require.NoError(t, err)
	require.True(t, views[0].Loaded)
	n, err := tb.rdb.ZCard(ctx, readby.NewStore(nil, tb.store).ZSetKey("huge", "r")).Result()
	require.NoError(t, err)
	require.Equal(t, int64(members), n, "the rebuild paged every member into the view's counts")
}
