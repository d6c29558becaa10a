package watch_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/watch"
)

// BenchmarkFanOut: 1,000 subscribers on one replica, each watching 10 of
// 100 channels; b.N marks written to the channel view (as the gateway's
// script writes them: cursor and stream entry together), each stamped
// with its wall time in t. Reports the updates delivered per second to
// the subscribers and the delay from mark to delivered update (p50, p99).
//
//	go test -run '^$' -bench BenchmarkFanOut -benchtime 20000x ./pkg/watch/
func BenchmarkFanOut(b *testing.B) {
	const subscribers, channels, perSub = 1000, 100, 10
	rdb := redistest.Client(b)
	v := &view{rdb: rdb, prefix: redistest.Prefix(b, rdb), maxLen: 10000, model: map[string]int64{}}
	h, err := watch.New(watch.Config{Redis: rdb, Keys: keysOf(rdb, v.prefix), Coalesce: 50 * time.Millisecond})
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() { cancel(); require.NoError(b, <-done) }()
	require.Eventually(b, func() bool { return h.Ready(ctx) == nil }, 5*time.Second, 5*time.Millisecond)

	var (
		delivered atomic.Int64
		mu        sync.Mutex
		delays    []time.Duration
		wg        sync.WaitGroup
	)
	subCtx, stopSubs := context.WithCancel(context.Background())
	for i := range subscribers {
		chs := make([]string, perSub)
		for j := range chs {
			chs[j] = "b" + strconv.Itoa((i*7+j*13)%channels)
		}
		sub, err := h.Subscribe(context.Background(), chs, "")
		require.NoError(b, err)
		_, err = sub.Next(subCtx) // the opening snapshot
		require.NoError(b, err)
		wg.Go(func() {
			defer sub.Close()
			var local []time.Duration
			for {
				ev, err := sub.Next(subCtx)
				if err != nil {
					mu.Lock()
					delays = append(delays, local...)
					mu.Unlock()
					return
				}
				now := time.Now().UnixMilli()
				for _, u := range ev.GetUpdates() {
					local = append(local, time.Duration(now-u.GetAtUnixMs())*time.Millisecond)
				}
				delivered.Add(int64(len(ev.GetUpdates())))
			}
		})
	}
	b.ResetTimer()
	start := time.Now()
	// Marks from 8 writers, each a new user-kind key most of the time.
	var writers sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		writers.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				ch := "b" + strconv.Itoa(int(i)%channels)
				at := strconv.FormatInt(time.Now().UnixMilli(), 10)
				err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: v.prefix + "cv:{" + ch + "}:s", MaxLen: 10000, Approx: true,
					Values: []any{"u", fmt.Sprintf("u%d", i%50), "k", "r", "e", "0", "s", strconv.FormatInt(i, 10), "t", at}}).Err()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	writers.Wait()
	// Every subscriber sees each of its channels' last entries; wait for
	// the fan-out to go quiet, then stop.
	last := int64(-1)
	for cur := delivered.Load(); cur != last; cur = delivered.Load() {
		last = cur
		time.Sleep(300 * time.Millisecond) // a quiet period ends the measurement, not a synchronisation
	}
	elapsed := time.Since(start) - 300*time.Millisecond
	stopSubs()
	wg.Wait()
	b.StopTimer()
	slices.Sort(delays)
	if len(delays) > 0 {
		b.ReportMetric(float64(delays[len(delays)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(delays[len(delays)*99/100].Milliseconds()), "p99-ms")
	}
	b.ReportMetric(float64(delivered.Load())/elapsed.Seconds(), "updates/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "marks/s")
}
