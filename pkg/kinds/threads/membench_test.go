package threads

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/thread"
)

// maxBytesPerFollowedThread is the budget of one followed (user, thread)
// in Redis under its default listpack settings.
const maxBytesPerFollowedThread = 64

// TestMemoryPerFollowedThread measures Redis bytes per followed (user,
// thread), with MEMORY USAGE (every field) over every user thread hash
// under the test's prefix (the key included), and asserts the budget under
// Redis' default listpack settings (hash-max-listpack-entries 512,
// hash-max-listpack-value 64). Sample: users × 10 threads each, short ids
// (user "u12345", channel "c123", root seq below 100,000), a read cursor
// (message "m<seq>", device "d1") and a follow, written through
// MergeStates. It runs 2,000 users by default and 20,000 with
//
//	RECEIPTS_MEMBENCH=1 go test -run TestMemoryPerFollowedThread -v ./pkg/kinds/threads/
//
// used_memory's growth is logged too: the whole server's, so other clients
// of a shared Redis blur it.
func TestMemoryPerFollowedThread(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := NewStore(nil, redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)}))
	require.NoError(t, s.redis.Load(ctx, Scripts...))
	users, perUser := 2000, 10
	if os.Getenv("RECEIPTS_MEMBENCH") != "" {
		users = 20000
	}
	cfg, err := rdb.ConfigGet(ctx, "hash-max-listpack-*").Result()
	require.NoError(t, err)
	defaults := cfg["hash-max-listpack-entries"] == "512" && cfg["hash-max-listpack-value"] == "64"

	now := time.Now().UnixMilli()
	before := redistest.SettledUsedMemory(ctx, t, rdb)
	const workers, batch = 4, 500
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(7, uint64(w)))
			var states []thread.State
			flush := func() error {
				res, err := s.MergeStates(ctx, states)
				for _, r := range res {
					if err == nil {
						err = r.Err
					}
				}
				states = states[:0]
				return err
			}
			for u := w; u < users; u += workers {
				for k := range perUser {
					root := 1 + rng.Int64N(100000)
					seq := 1 + rng.Int64N(200)
					c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}
					states = append(states, thread.State{
						Key:     thread.Key{User: "u" + strconv.Itoa(10000+u), Ref: thread.Ref{Channel: "c" + strconv.Itoa((u*7+k*131)%1000), Root: root}},
						Cursors: receipt.State{Read: c, Delivered: c, DeviceID: "d1", UpdatedAtUnixMs: now - rng.Int64N(30*24*3600*1000)},
						Follow:  thread.Follow{Following: true, VersionUnixMs: now - rng.Int64N(60*24*3600*1000)},
					})
					if len(states) == batch {
						if err := flush(); err != nil {
							errs <- err
							return
						}
					}
				}
			}
			if len(states) > 0 {
				if err := flush(); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	usedDelta := redistest.SettledUsedMemory(ctx, t, rdb) - before

	var total, fields, valueBytes int64
	encodings := map[string]int{}
	iter := rdb.Scan(ctx, 0, s.redis.Prefix()+userTag+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		n, err := rdb.MemoryUsage(ctx, key, 0).Result()
		require.NoError(t, err)
		enc, err := rdb.ObjectEncoding(ctx, key).Result()
		require.NoError(t, err)
		vals, err := rdb.HVals(ctx, key).Result()
		require.NoError(t, err)
		total += n
		encodings[enc]++
		fields += int64(len(vals))
		for _, v := range vals {
			valueBytes += int64(len(v))
		}
	}
	require.NoError(t, iter.Err())
	require.Positive(t, fields)
	perThread := float64(total) / float64(fields)
	t.Logf("config %v; %d users × %d followed threads = %d registers: MEMORY USAGE %.1f B/thread (%d B), used_memory growth %.1f B/thread, average value %.1f B, encodings %v",
		cfg, users, perUser, fields, perThread, total, float64(usedDelta)/float64(fields), float64(valueBytes)/float64(fields), encodings)
	if !defaults {
		t.Logf("not Redis' default listpack settings: the %d B budget is not asserted", maxBytesPerFollowedThread)
		return
	}
	require.Equal(t, map[string]int{"listpack": users}, encodings)
	require.LessOrEqual(t, perThread, float64(maxBytesPerFollowedThread))
}
