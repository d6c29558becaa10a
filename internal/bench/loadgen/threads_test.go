package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The setup makes every call a thread needs, and the timed loop counts a
// short page as a failure rather than a fast answer.
func TestThreadsSetupAndRun(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	listed := 5
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := r.Method + " other"
		switch {
		case strings.Contains(r.URL.Path, "/members/"):
			kind = "join"
		case r.URL.Path == "/v1/messages:notify":
			kind = "roots"
		case strings.HasSuffix(r.URL.Path, "/messages"):
			kind = "reply"
		case strings.HasSuffix(r.URL.Path, "/threads"):
			mu.Lock()
			n := listed
			mu.Unlock()
			fmt.Fprintf(w, `{"threads":[%s]}`, strings.TrimSuffix(strings.Repeat("{},", n), ","))
			return
		}
		mu.Lock()
		calls[kind]++
		mu.Unlock()
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	cfg := ThreadConfig{Target: srv.URL, User: "u", Threads: 5, PerChannel: 2, SetupConcurrency: 3,
		Duration: 50 * time.Millisecond, Concurrency: 1, Limit: 1000}
	if err := SetupThreads(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"join": 6, "roots": 3, "reply": 10} // 3 channels × 2 users; 5 threads × 2 replies
	for k, v := range want {
		if calls[k] != v {
			t.Errorf("%s calls = %d, want %d (all: %v)", k, calls[k], v, calls)
		}
	}
	res, err := RunThreads(context.Background(), cfg)
	if err != nil || res.Errors != 0 || res.Calls == 0 || res.Items != 5*res.Calls {
		t.Fatalf("full pages: %v, %v", res, err)
	}
	mu.Lock()
	listed = 4
	mu.Unlock()
	if res, _ := RunThreads(context.Background(), cfg); res.Errors == 0 || res.Errors != res.Calls {
		t.Fatalf("short pages counted as answers: %v", res)
	}
}

func TestInParallelStopsAtFirstError(t *testing.T) {
	var ran atomic.Int64
	boom := errors.New("boom")
	err := inParallel(context.Background(), 4, 1000, func(ctx context.Context, i int) error {
		ran.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || ran.Load() >= 1000 {
		t.Fatalf("err %v after %d calls", err, ran.Load())
	}
	ran.Store(0)
	if err := inParallel(context.Background(), 4, 100, func(context.Context, int) error { ran.Add(1); return nil }); err != nil || ran.Load() != 100 {
		t.Fatalf("err %v after %d calls, want 100", err, ran.Load())
	}
}
