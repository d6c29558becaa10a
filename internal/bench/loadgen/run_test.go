package loadgen_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/readstate/receipts/internal/bench/loadgen"
	"github.com/readstate/receipts/pkg/receipt"
)

// fakeGate is a minimal stand-in for kafkagate's JSON batch endpoint: it
// max-merges marks into a map and answers like protojson does. With
// failEvery > 0 it fails every failEvery-th request with a Connect error.
// durable is a copy of the state that trails behind by durableDelay, to
// stand in for Postgres; each request takes serviceTime.
type fakeGate struct {
	mu           sync.Mutex
	state        map[receipt.Key]receipt.State
	durable      map[receipt.Key]receipt.State
	requests     atomic.Int64
	failEvery    int64
	durableDelay time.Duration
	// serviceTime is how long each request takes (on the bubble's clock).
	serviceTime time.Duration
}

// gateURL is the fake gate's address; gate.dial connects to it whatever
// the address.
const gateURL = "http://fakegate.test"

// bubbleGate is a fakeGate served on an in-memory listener. Called inside
// a testing/synctest bubble, the server, its connections and the load
// tool all live in the bubble: every timer and deadline runs on the
// bubble's clock, so durations are exact and no test waits for real time.
type bubbleGate struct {
	*fakeGate
	dial func(addr string) (net.Conn, error)
}

func newFakeGate(t *testing.T) bubbleGate {
	g := &fakeGate{state: map[receipt.Key]receipt.State{}, durable: map[receipt.Key]receipt.State{}}
	ln := fasthttputil.NewInmemoryListener()
	srv := &http.Server{Handler: g}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
		// fasthttp's idle-connection cleaners (the load tool's client)
		// check every 1 to 10 s and return once they find no connection:
		// advance the bubble's clock past that, which takes no real time,
		// so that the bubble ends with no goroutine left.
		time.Sleep(time.Minute)
	})
	return bubbleGate{fakeGate: g, dial: func(string) (net.Conn, error) { return ln.Dial() }}
}

type wireReceipt struct {
	UserID    string `json:"user_id"`
	ChannelID string `json:"channel_id"`
	Kind      string `json:"kind"`
	Seq       int64  `json:"seq"`
	MessageID string `json:"message_id"`
	DeviceID  string `json:"device_id"`
}

func (g *fakeGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct{ Receipts []wireReceipt }
	single := false
	switch {
	case r.Method != http.MethodPost:
		http.Error(w, `{"code":"not_found"}`, http.StatusNotFound)
		return
	case r.URL.Path == "/v1/receipts:mark":
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"code":"invalid_argument","message":"`+err.Error()+`"}`, http.StatusBadRequest)
			return
		}
	default:
		// /v1/users/{user}/channels/{channel}/read|delivered
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/users/"), "/")
		var rc wireReceipt
		if len(parts) != 4 || parts[1] != "channels" || json.NewDecoder(r.Body).Decode(&rc) != nil {
			http.Error(w, `{"code":"not_found"}`, http.StatusNotFound)
			return
		}
		rc.UserID, rc.ChannelID, rc.Kind = parts[0], parts[2], strings.ToUpper(parts[3])
		req.Receipts, single = []wireReceipt{rc}, true
	}
	time.Sleep(g.serviceTime)
	n := g.requests.Add(1)
	if g.failEvery > 0 && n%g.failEvery == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"unavailable","message":"spool full, retry"}`))
		return
	}
	type res struct {
		State struct {
			ChannelID string `json:"channelId"`
			Read      struct {
				Position struct {
					Seq string `json:"seq"`
				} `json:"position"`
			} `json:"read"`
		} `json:"state"`
		Advanced   bool   `json:"advanced,omitempty"`
		Durability string `json:"durability"`
	}
	out := struct {
		Results []res `json:"results"`
	}{}
	var merged []receipt.State
	g.mu.Lock()
	for _, rc := range req.Receipts {
		k := receipt.Key{User: rc.UserID, Channel: rc.ChannelID}
		c := receipt.Cursor{Position: receipt.Position{Seq: rc.Seq}, MessageID: rc.MessageID}
		in := receipt.State{Key: k, Delivered: c, DeviceID: rc.DeviceID}
		if rc.Kind == "READ" {
			in.Read = c
		}
		st, adv := receipt.Merge(g.state[k], in)
		g.state[k] = st
		merged = append(merged, in)
		var rr res
		rr.State.ChannelID = rc.ChannelID
		rr.State.Read.Position.Seq = strconv.FormatInt(st.Read.Position.Seq, 10)
		rr.Advanced, rr.Durability = adv, "KAFKA"
		out.Results = append(out.Results, rr)
	}
	g.mu.Unlock()
	if g.durableDelay > 0 {
		time.AfterFunc(g.durableDelay, func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, in := range merged {
				g.durable[in.Key], _ = receipt.Merge(g.durable[in.Key], in)
			}
		})
	}
	w.Header().Set("Content-Type", "application/json")
	if single {
		_ = json.NewEncoder(w).Encode(struct {
			Result res `json:"result"`
		}{out.Results[0]})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (g *fakeGate) get(_ context.Context, user string, channels []string) ([]receipt.State, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []receipt.State
	for _, c := range channels {
		if st, ok := g.durable[receipt.Key{User: user, Channel: c}]; ok {
			out = append(out, st)
		}
	}
	return out, nil
}

func TestRunModelMatchesServer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRunModelMatchesServer)
}

func testRunModelMatchesServer(t *testing.T) {
	g := newFakeGate(t)
	g.failEvery = 7
	g.serviceTime = time.Millisecond
	var progress []loadgen.Progress
	var pmu sync.Mutex
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Target: gateURL, Dial: g.dial, Events: 20000, Users: 300, Channels: 10, Zipf: 1.1,
		Dup: 0.2, Reorder: 0.1, DeliveredShare: 0.2, Batch: 50, Concurrency: 4, Seed: 3, Model: true,
		ProgressInterval: 10 * time.Millisecond,
		Progress: func(p loadgen.Progress) {
			pmu.Lock()
			defer pmu.Unlock()
			progress = append(progress, p)
		},
	})
	require.NoError(t, err)
	require.EqualValues(t, 20000, res.Sent)
	require.EqualValues(t, 400, res.Requests)
	require.EqualValues(t, res.Sent, res.AckedEvents+res.Failed)
	require.EqualValues(t, 400/7, res.Errors["http 503 unavailable"], "%v", res.Errors)
	require.EqualValues(t, 400/7*50, res.Failed)
	require.Contains(t, res.ErrorSamples["http 503 unavailable"], "spool full")
	require.Greater(t, res.Advanced, int64(0))
	require.Less(t, res.Advanced, res.AckedEvents, "duplicates and reorders do not advance")
	require.EqualValues(t, 400-400/7, res.Latency.Count)
	require.Greater(t, res.Latency.Max, time.Duration(0))
	require.Equal(t, time.Millisecond, res.Latency.Max, "the gate's service time, on the bubble's clock")
	require.Greater(t, res.EventsPerSec, 0.0)

	// The model holds exactly the greatest acknowledged positions: the
	// server covers each one, and because failed requests merged nothing
	// here, the server state equals the model.
	require.Equal(t, len(res.Acked), res.Keys)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, res.Acked, len(g.state))
	for k, want := range res.Acked {
		got := g.state[k]
		require.True(t, got.SameCursors(want), "%s: server %+v, model %+v", k.KafkaKey(), got, want)
		if want.Read.Position.Seq > 0 {
			require.Equal(t, fmt.Sprintf("m%d", want.Read.Position.Seq), want.Read.MessageID, "the id travels with its seq")
		}
		require.Equal(t, fmt.Sprintf("m%d", want.Delivered.Position.Seq), want.Delivered.MessageID)
	}
	pmu.Lock()
	defer pmu.Unlock()
	require.NotEmpty(t, progress)
	last := progress[len(progress)-1]
	require.Equal(t, res.Sent, last.Sent)
	require.Equal(t, res.AckedEvents, last.Acked)
	require.EqualValues(t, 400/7, last.Errors)
}

func TestRunSingleMarkRoutes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRunSingleMarkRoutes)
}

func testRunSingleMarkRoutes(t *testing.T) {
	g := newFakeGate(t)
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Target: gateURL, Dial: g.dial, Events: 3000, Users: 100, Channels: 10, Zipf: 1.1,
		Dup: 0.2, Reorder: 0.1, DeliveredShare: 0.3, Batch: 1, Single: true, Concurrency: 8, Seed: 5, Model: true,
	})
	require.NoError(t, err)
	require.EqualValues(t, 3000, res.Requests)
	require.EqualValues(t, 3000, res.AckedEvents, "%v", res.ErrorSamples)
	require.Greater(t, res.Advanced, int64(0))
	require.Less(t, res.Advanced, res.AckedEvents)
	require.GreaterOrEqual(t, res.Latency.P999, res.Latency.P99)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, res.Acked, len(g.state))
	for k, want := range res.Acked {
		require.True(t, g.state[k].SameCursors(want), "%s: server %+v, model %+v", k.KafkaKey(), g.state[k], want)
	}

	_, err = loadgen.Run(context.Background(), loadgen.Config{Target: gateURL, Dial: g.dial, Batch: 2, Single: true})
	require.ErrorContains(t, err, "batch must be 1")
}

func TestRunCountsKeysWithoutAModel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRunCountsKeysWithoutAModel)
}

func testRunCountsKeysWithoutAModel(t *testing.T) {
	g := newFakeGate(t)
	g.failEvery = 5
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Target: gateURL, Dial: g.dial, Events: 5000, Users: 200, Channels: 10, Zipf: 1.1,
		Dup: 0.2, Reorder: 0.1, Batch: 20, Concurrency: 4, Seed: 9,
	})
	require.NoError(t, err)
	require.Nil(t, res.Acked, "no model unless asked")
	require.Positive(t, res.Failed)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.state, res.Keys, "keys with an acknowledged event, failed requests' keys not counted")
}

// The pacing runs on the bubble's clock, where the fake gate answers in
// no time: the run lasts exactly its duration and offers exactly the
// events due before its end.
func TestRunRateAndDuration(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newFakeGate(t)
		start := time.Now()
		res, err := loadgen.Run(context.Background(), loadgen.Config{
			Target: gateURL, Dial: g.dial, Rate: 2000, Duration: 500 * time.Millisecond, Batch: 20, Concurrency: 2,
		})
		require.NoError(t, err)
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 500*time.Millisecond)
		require.Less(t, took, 3*time.Second)
		require.Equal(t, 500*time.Millisecond, took)
		// 2000 ev/s for 0.5 s: 1000 events (none due at or after the end),
		// paced in batches of 20.
		require.LessOrEqual(t, res.Sent, int64(1000))
		require.Greater(t, res.Sent, int64(400))
		require.EqualValues(t, 1000, res.Sent)
		require.Equal(t, res.Sent, res.AckedEvents)
		require.Empty(t, res.Errors)
	})
}

func TestRunCountsTransportErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	res, err := loadgen.Run(context.Background(), loadgen.Config{Target: url, Events: 30, Batch: 10, Concurrency: 1})
	require.NoError(t, err)
	require.EqualValues(t, 30, res.Sent)
	require.Zero(t, res.AckedEvents)
	require.EqualValues(t, 3, res.Errors["transport"], "%v", res.Errors)
	require.Empty(t, res.Acked)
}

func TestRunBadResponse(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"results":[{}]}`)) // one result for a batch of 5
	}))
	t.Cleanup(srv.Close)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Target: srv.URL, Events: 5, Batch: 5})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Errors["bad response"])
	require.Zero(t, res.AckedEvents)
}

func TestRunMeasuresEndToEndLag(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRunMeasuresEndToEndLag)
}

func testRunMeasuresEndToEndLag(t *testing.T) {
	g := newFakeGate(t)
	g.durableDelay = 60 * time.Millisecond
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Target: gateURL, Dial: g.dial, Rate: 5000, Duration: 400 * time.Millisecond, Batch: 10, Concurrency: 2,
		Lag: &loadgen.LagConfig{Get: g.get, SampleEvery: 10, PollInterval: 5 * time.Millisecond, Timeout: 5 * time.Second},
	})
	require.NoError(t, err)
	require.NotNil(t, res.Lag)
	require.Greater(t, res.Lag.Count, int64(10))
	require.Zero(t, res.Lag.TimedOut)
	require.Zero(t, res.Lag.Unfinished)
	// The store trails by 60 ms (on the bubble's clock); polling adds at
	// most one interval.
	require.GreaterOrEqual(t, res.Lag.P50, 50*time.Millisecond)
	require.Less(t, res.Lag.P50, time.Second)
	require.GreaterOrEqual(t, res.Lag.P50, 60*time.Millisecond)
	require.LessOrEqual(t, res.Lag.Max, 65*time.Millisecond)

	js, err := json.Marshal(res)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(js, &m))
	require.Contains(t, m, "e2e_lag")
	require.Contains(t, m["e2e_lag"], "p99_ms")
	require.Contains(t, m, "elapsed_s")
	require.Contains(t, res.Summary(), "e2e lag:")
}

func TestRunLagTimesOutWhenNeverDurable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRunLagTimesOutWhenNeverDurable)
}

func testRunLagTimesOutWhenNeverDurable(t *testing.T) {
	g := newFakeGate(t)
	never := func(context.Context, string, []string) ([]receipt.State, error) { return nil, nil }
	res, err := loadgen.Run(context.Background(), loadgen.Config{
		Target: gateURL, Dial: g.dial, Events: 100, Batch: 10,
		Lag: &loadgen.LagConfig{Get: never, SampleEvery: 10, PollInterval: 5 * time.Millisecond, Timeout: 100 * time.Millisecond},
	})
	require.NoError(t, err)
	require.Zero(t, res.Lag.Count)
	require.Equal(t, 10, res.Lag.TimedOut+res.Lag.Skipped)
	require.Positive(t, res.Lag.TimedOut)
}

func TestRunStopsOnCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := newFakeGate(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := loadgen.Run(ctx, loadgen.Config{Target: gateURL, Dial: g.dial, Duration: time.Hour, Rate: 1000})
		require.NoError(t, err)
		require.Less(t, time.Since(start), 5*time.Second)
		require.Equal(t, 200*time.Millisecond, time.Since(start), "the run ends when its context does")
		require.Positive(t, res.AckedEvents)
	})
}

func TestRunNamesRESTErrorCodesAndReasons(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":3,"message":"receipts[0].user_id: contains ':'","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",
			"reason":"INVALID_ID","domain":"receipts.v1","metadata":{"field":"receipts[0].user_id"}}]}`))
	}))
	t.Cleanup(srv.Close)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Target: srv.URL, Events: 10, Batch: 5})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Errors["http 400 invalid_argument INVALID_ID"], "%v", res.Errors)
}

func TestRunAsksForGzipOnlyWhenTold(t *testing.T) {
	t.Parallel()
	var gz atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const answer = `{"results":[{"advanced":true}]}`
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = w.Write([]byte(answer))
			return
		}
		gz.Add(1)
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write([]byte(answer))
		_ = zw.Close()
	}))
	t.Cleanup(srv.Close)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Target: srv.URL, Events: 3, Batch: 1, Concurrency: 1})
	require.NoError(t, err)
	require.Zero(t, gz.Load())
	require.EqualValues(t, 3, res.Advanced)
	res, err = loadgen.Run(context.Background(), loadgen.Config{Target: srv.URL, Events: 3, Batch: 1, Concurrency: 1, Gzip: true})
	require.NoError(t, err)
	require.EqualValues(t, 3, gz.Load())
	require.EqualValues(t, 3, res.Advanced, "the compressed answers are read: %v", res.ErrorSamples)
}
