package cursors

// Memory per stored state and merge throughput, measured through the real
// Store.Merge path. Neither runs in a normal `go test`:
//
//	RECEIPTS_MEMBENCH=1 go test -run TestMemoryPerState -v -timeout 60m ./pkg/redisstore/
//	go test -run '^$' -bench BenchmarkMerge -count 5 ./pkg/redisstore/
//
// TestMemoryPerState flushes the logical database it measures in
// (RECEIPTS_MEMBENCH_URL, default redis://127.0.0.1:6379/14) before and
// after each scenario, so it refuses database 0 (the dev stack's) and the
// tests' database, and a non-empty database unless RECEIPTS_MEMBENCH_FLUSH=1.
// RECEIPTS_MEMBENCH_STATES (default 1,000,000 per shape) and
// RECEIPTS_MEMBENCH_SHAPES (comma-separated: 10ch,200ch,1000ch,10ch-uuid;
// default all) narrow it. Each shape is loaded once per layout (v1, the
// previous one, then compact). The benchmark uses the tests' database with a
// per-run key prefix like every other test here. Results: BENCHMARKS.md,
// "Redis memory per state".

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

const membenchURLDefault = "redis://127.0.0.1:6379/14"

// memShape is one data set of the memory measurement.
type memShape struct {
	name            string
	users           int
	channelsPerUser int
	// msgID names the message at seq.
	msgID func(rng *rand.Rand, seq int64) string
}

// channelSpace is the number of distinct channel ids users are spread over.
const channelSpace = 10000

func loadgenMsgID(_ *rand.Rand, seq int64) string { return "m" + strconv.FormatInt(seq, 10) }

// uuidMsgID is a 36-byte id, as chat backends often use.
func uuidMsgID(rng *rand.Rand, _ int64) string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// headOf is channel c's head: log-uniform over 100 .. 1,000,000 messages.
func headOf(c int) int64 {
	r := rand.New(rand.NewPCG(uint64(c), 7))
	return int64(math.Pow(10, 2+4*r.Float64()))
}

// channelOf is the k-th channel of user u: distinct for k < channelSpace
// (the stride is prime to channelSpace), ids like the load generator's.
func channelOf(u, k int) int {
	return (u*7919 + k*4729) % channelSpace
}

// memState is the state of user u in its k-th channel: the read cursor a few
// messages behind the channel's head; in 30 % of the states delivered is
// 1–3 messages ahead of read (else equal), 1 % had a mark-unread (epoch 1);
// devices d0–d2; updated in the last 30 days.
func memState(rng *rand.Rand, sh memShape, u, k int, now int64) receipt.State {
	c := channelOf(u, k)
	head := headOf(c)
	rs := max(1, head-rng.Int64N(20))
	read := receipt.Cursor{Position: receipt.Position{Seq: rs}, MessageID: sh.msgID(rng, rs)}
	if rng.IntN(100) == 0 {
		read.Position.Epoch = 1
	}
	delivered := read
	if rng.IntN(10) < 3 {
		ds := rs + 1 + rng.Int64N(3)
		delivered = receipt.Cursor{Position: receipt.Position{Epoch: read.Position.Epoch, Seq: ds}, MessageID: sh.msgID(rng, ds)}
	}
	return receipt.State{
		Key:             receipt.Key{User: "u" + strconv.Itoa(u), Channel: "c" + strconv.Itoa(c)},
		Read:            read,
		Delivered:       delivered,
		DeviceID:        "d" + strconv.Itoa(rng.IntN(3)),
		UpdatedAtUnixMs: now - rng.Int64N(30*24*3600*1000),
	}
}

// redisCPU is the server's main-thread CPU time so far, in seconds.
func redisCPU(ctx context.Context, t testing.TB, rdb *redis.Client) float64 {
	info, err := rdb.Info(ctx, "cpu").Result()
	require.NoError(t, err)
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, f := range []string{"used_cpu_user_main_thread:", "used_cpu_sys_main_thread:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err)
				sum += x
			}
		}
	}
	return sum
}

// memLayout is a way of storing the states; newStore gives a Store writing it.
type memLayout struct {
	name     string
	newStore func(rdb *redis.Client, prefix string) Store
}

func memLayouts() []memLayout {
	return []memLayout{
		{"v1", func(rdb *redis.Client, prefix string) Store { return newV1Store(rdb, prefix) }},
		{"compact", func(rdb *redis.Client, prefix string) Store {
			return NewStore(redisstore.New(rdb, redisstore.Config{Prefix: prefix}))
		}},
	}
}

type memResult struct {
	states             int
	usedDelta          int64
	sampledKeys        int
	sampledStates      int
	sampledBytes       int64
	valueBytes         int64
	encodings          map[string]int
	loadSeconds        float64
	usedBefore, usedAt int64
}

func (r memResult) String() string {
	encs := make([]string, 0, len(r.encodings))
	for e, n := range r.encodings {
		encs = append(encs, fmt.Sprintf("%s=%d", e, n))
	}
	sort.Strings(encs)
	return fmt.Sprintf("states=%d used_memory_delta=%d (%.1f B/state) memory_usage=%.1f B/state over %d keys (%d states) avg_value=%.1f B encodings[%s] load=%.1fs (%.0f merges/s)",
		r.states, r.usedDelta, float64(r.usedDelta)/float64(r.states),
		float64(r.sampledBytes)/float64(r.sampledStates), r.sampledKeys, r.sampledStates,
		float64(r.valueBytes)/float64(r.sampledStates), strings.Join(encs, " "),
		r.loadSeconds, float64(r.states)/r.loadSeconds)
}

// measureMemory flushes the database, loads sh through s.Merge in batches of
// 100 from 8 goroutines, and measures.
func measureMemory(ctx context.Context, t *testing.T, rdb *redis.Client, s Store, sh memShape) memResult {
	require.NoError(t, rdb.FlushDB(ctx).Err())
	require.NoError(t, s.redis.Load(ctx))
	before := redistest.SettledUsedMemory(ctx, t, rdb)
	now := time.Now().UnixMilli()
	const workers, batch = 8, 100
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(42, uint64(w)))
			states := make([]receipt.State, 0, batch)
			flush := func() error {
				if len(states) == 0 {
					return nil
				}
				res, err := s.Merge(ctx, states)
				if err != nil {
					return err
				}
				for _, r := range res {
					if r.Err != nil {
						return r.Err
					}
				}
				states = states[:0]
				return nil
			}
			for u := w; u < sh.users; u += workers {
				for k := range sh.channelsPerUser {
					states = append(states, memState(rng, sh, u, k, now))
					if len(states) == batch {
						if err := flush(); err != nil {
							errs <- err
							return
						}
					}
				}
			}
			if err := flush(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	res := memResult{states: sh.users * sh.channelsPerUser, loadSeconds: time.Since(start).Seconds(), encodings: map[string]int{}}
	res.usedBefore = before
	res.usedAt = redistest.SettledUsedMemory(ctx, t, rdb)
	res.usedDelta = res.usedAt - before

	// MEMORY USAGE (SAMPLES 0: every field) over up to 2,000 users spread
	// evenly over the id range.
	step := max(1, sh.users/2000)
	for u := 0; u < sh.users; u += step {
		key := s.RedisKey("u" + strconv.Itoa(u))
		n, err := rdb.MemoryUsage(ctx, key, 0).Result()
		require.NoError(t, err)
		enc, err := rdb.ObjectEncoding(ctx, key).Result()
		require.NoError(t, err)
		vals, err := rdb.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		res.sampledKeys++
		res.sampledBytes += n
		res.encodings[enc]++
		for f, v := range vals {
			if f == redisstore.LoadedField {
				continue
			}
			res.sampledStates++
			res.valueBytes += int64(len(v))
		}
	}
	require.NoError(t, rdb.FlushDB(ctx).Err())
	return res
}

// TestMemoryPerState is the memory measurement (see the top of this file).
func TestMemoryPerState(t *testing.T) {
	if os.Getenv("RECEIPTS_MEMBENCH") == "" {
		t.Skip("set RECEIPTS_MEMBENCH=1 to measure Redis memory per state (flushes the database of RECEIPTS_MEMBENCH_URL)")
	}
	ctx := context.Background()
	url := os.Getenv("RECEIPTS_MEMBENCH_URL")
	if url == "" {
		url = membenchURLDefault
	}
	opt, err := redis.ParseURL(url)
	require.NoError(t, err)
	testOpt, err := redis.ParseURL(redistest.URL())
	require.NoError(t, err)
	if opt.DB == 0 || (opt.DB == testOpt.DB && opt.Addr == testOpt.Addr) {
		t.Fatalf("RECEIPTS_MEMBENCH_URL %s: refusing to flush database %d (the dev stack's or the tests')", url, opt.DB)
	}
	opt.PoolSize = 16
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	require.NoError(t, rdb.Ping(ctx).Err())
	if n, err := rdb.DBSize(ctx).Result(); err == nil && n > 0 && os.Getenv("RECEIPTS_MEMBENCH_FLUSH") == "" {
		t.Fatalf("database %d holds %d keys; set RECEIPTS_MEMBENCH_FLUSH=1 to let the measurement flush it", opt.DB, n)
	}

	info, err := rdb.Info(ctx, "server").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(line, "redis_version:") {
			t.Logf("%s", line)
		}
	}
	cfg, err := rdb.ConfigGet(ctx, "hash-max-listpack-*").Result()
	require.NoError(t, err)
	t.Logf("config %v, database %d", cfg, opt.DB)

	total := 1_000_000
	if v := os.Getenv("RECEIPTS_MEMBENCH_STATES"); v != "" {
		total, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	shapes := []memShape{
		{name: "10ch", users: total / 10, channelsPerUser: 10, msgID: loadgenMsgID},
		{name: "200ch", users: max(1, total/200), channelsPerUser: 200, msgID: loadgenMsgID},
		{name: "1000ch", users: max(1, total/1000), channelsPerUser: 1000, msgID: loadgenMsgID},
		{name: "10ch-uuid", users: total / 10, channelsPerUser: 10, msgID: uuidMsgID},
	}
	only := os.Getenv("RECEIPTS_MEMBENCH_SHAPES")
	for _, sh := range shapes {
		if only != "" && !strings.Contains(","+only+",", ","+sh.name+",") {
			continue
		}
		for _, l := range memLayouts() {
			s := l.newStore(rdb, "m:")
			r := measureMemory(ctx, t, rdb, s, sh)
			t.Logf("shape=%s (%d users x %d channels) layout=%s: %s", sh.name, sh.users, sh.channelsPerUser, l.name, r)
		}
	}
}

// BenchmarkMerge is the gateway's Redis write: pipelined Merge calls of 100
// states from 16 goroutines (8 × GOMAXPROCS 2), over 16,000 users × 10
// channels; the marks are 70 % advancing (80 % read, 20 % delivered-only),
// 20 % exact resends of a recent mark and 10 % late (an older seq), like
// the load scripts/bench.sh drives (--dup 0.2 --reorder 0.1).
func BenchmarkMerge(b *testing.B) {
	for _, l := range memLayouts() {
		b.Run("layout="+l.name, func(b *testing.B) {
			ctx := context.Background()
			rdb := redistest.Client(b)
			s := l.newStore(rdb, redistest.Prefix(b, rdb))
			require.NoError(b, s.redis.Load(ctx))
			var seed sync.Mutex
			next := uint64(0)
			b.SetParallelism(8)
			cpu0 := redisCPU(ctx, b, rdb)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				seed.Lock()
				g := next
				next++
				seed.Unlock()
				rng := rand.New(rand.NewPCG(g, 99))
				const users, channels = 1000, 10
				last := make([]int64, users*channels)
				recent := make([]receipt.State, 0, 256)
				now := time.Now().UnixMilli()
				batch := make([]receipt.State, 100)
				for pb.Next() {
					for i := range batch {
						r := rng.IntN(10)
						if r < 2 && len(recent) > 0 {
							batch[i] = recent[rng.IntN(len(recent))]
							continue
						}
						idx := rng.IntN(users * channels)
						seq := last[idx] + 1 + rng.Int64N(3)
						if r < 3 && last[idx] > 1 {
							seq = 1 + rng.Int64N(last[idx]-1)
						} else {
							last[idx] = seq
						}
						c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}
						st := receipt.State{
							Key:             receipt.Key{User: "g" + strconv.FormatUint(g, 10) + "u" + strconv.Itoa(idx/channels), Channel: "c" + strconv.Itoa(idx%channels)},
							Delivered:       c,
							DeviceID:        "d" + strconv.Itoa(rng.IntN(3)),
							UpdatedAtUnixMs: now,
						}
						if rng.IntN(10) < 8 {
							st.Read = c
						}
						batch[i] = st
						if len(recent) < cap(recent) {
							recent = append(recent, st)
						} else {
							recent[rng.IntN(len(recent))] = st
						}
					}
					res, err := s.Merge(ctx, batch)
					if err != nil {
						b.Error(err)
						return
					}
					for _, r := range res {
						if r.Err != nil {
							b.Error(r.Err)
							return
						}
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "merges/s")
			// The server's CPU per merge (the whole server's: other clients
			// of a shared Redis add to it).
			b.ReportMetric((redisCPU(ctx, b, rdb)-cpu0)*1e6/(float64(b.N)*100), "redis-µs/merge")
		})
	}
}
