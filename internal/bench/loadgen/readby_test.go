package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeChannels is a gateway stand-in for the read-by benchmarks: it
// records joins, heads and marks, refuses a mark past the head or by a
// non-member, and answers the read routes with a fixed body.
type fakeChannels struct {
	mu      sync.Mutex
	members map[string]map[string]bool
	heads   map[string]int64
	marks   map[string]int64 // channel -> marks accepted
	cursor  map[string]int64 // user|channel -> read seq
	gets    map[string]int   // route kind -> GETs
}

func newFakeChannels() *fakeChannels {
	return &fakeChannels{members: map[string]map[string]bool{}, heads: map[string]int64{}, marks: map[string]int64{},
		cursor: map[string]int64{}, gets: map[string]int{}}
}

func (f *fakeChannels) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodPut && len(parts) == 4 && parts[0] == "channels" && parts[2] == "members":
		if f.members[parts[1]] == nil {
			f.members[parts[1]] = map[string]bool{}
		}
		f.members[parts[1]][parts[3]] = true
		fmt.Fprint(w, `{}`)
	case r.Method == http.MethodPost && len(parts) == 3 && parts[2] == "messages":
		var n struct{ Seq int64 }
		_ = json.Unmarshal(body, &n)
		f.heads[parts[1]] = max(f.heads[parts[1]], n.Seq)
		fmt.Fprint(w, `{}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/receipts:mark":
		var req struct {
			Receipts []struct {
				UserID    string `json:"user_id"`
				ChannelID string `json:"channel_id"`
				Seq       int64
			}
		}
		_ = json.Unmarshal(body, &req)
		var res []string
		for _, m := range req.Receipts {
			if m.Seq > f.heads[m.ChannelID] || !f.members[m.ChannelID][m.UserID] {
				http.Error(w, `{"code":"invalid_argument"}`, http.StatusBadRequest)
				return
			}
			k := m.UserID + "|" + m.ChannelID
			adv := m.Seq > f.cursor[k]
			f.cursor[k] = max(f.cursor[k], m.Seq)
			f.marks[m.ChannelID]++
			res = append(res, fmt.Sprintf(`{"advanced":%v}`, adv))
		}
		fmt.Fprintf(w, `{"results":[%s]}`, strings.Join(res, ","))
	case r.Method == http.MethodGet:
		kind := parts[len(parts)-1]
		f.gets[kind]++
		fmt.Fprint(w, `{"detailed":true}`)
	default:
		http.NotFound(w, r)
	}
}

func TestRunMoveLogSendsAdvancingMarksWithinTheHead(t *testing.T) {
	t.Parallel()
	f := newFakeChannels()
	srv := httptest.NewServer(f)
	defer srv.Close()
	quiet := 0
	rows, err := RunMoveLog(context.Background(), MoveLogConfig{
		Target: srv.URL, Prefix: "t-", Sizes: []int{3, 7}, Events: 50, Rate: 100000, Batch: 8,
		WaitQuiet: func(context.Context) error { quiet++; return nil },
		LogRows: func(_ context.Context, ch string) (int64, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return 2 * f.marks[ch], nil // a stand-in: two rows per mark
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || quiet != 4 {
		t.Fatalf("rows %v, WaitQuiet called %d times; want 2 rows, 4 calls", rows, quiet)
	}
	for i, size := range []int{3, 7} {
		r := rows[i]
		if r.Members != size || r.Events != 50 || r.Advanced != 50 || r.Rows != 100 || r.RowsPerEvent() != 2 {
			t.Errorf("size %d: %+v; want 50 marks, all advanced, 100 rows", size, r)
		}
		if got := len(f.members[fmt.Sprintf("t-s%d", size)]); got != size {
			t.Errorf("size %d: %d members joined", size, got)
		}
	}
}

func TestRunMoveLogStopsOnARefusedMark(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/receipts:mark" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	_, err := RunMoveLog(context.Background(), MoveLogConfig{
		Target: srv.URL, Prefix: "t-", Sizes: []int{2}, Events: 10, Rate: 1000, Batch: 5,
		WaitQuiet: func(context.Context) error { return nil },
		LogRows:   func(context.Context, string) (int64, error) { return 0, nil },
	})
	if err == nil || !strings.Contains(err.Error(), "http 403") {
		t.Fatalf("err = %v; want the refusal", err)
	}
}

func TestReadByMeasuresEveryOperation(t *testing.T) {
	t.Parallel()
	f := newFakeChannels()
	srv := httptest.NewServer(f)
	defer srv.Close()
	cfg := ReadByConfig{Target: srv.URL, Channel: "rb", Members: 5, Messages: 20, Duration: 150 * time.Millisecond, Rounds: 2,
		ChannelRate: 200, Ping: func(context.Context) error { return nil }}
	if err := SetupReadBy(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if len(f.members["rb"]) != 5 || f.heads["rb"] != 20 {
		t.Fatalf("setup: %d members, head %d", len(f.members["rb"]), f.heads["rb"])
	}
	res, err := RunReadBy(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range res.Ops {
		names = append(names, o.Name)
		if o.Calls == 0 || o.Errors != 0 || o.Latency.Count != o.Calls || o.Elapsed < 2*cfg.Duration {
			t.Errorf("%s: %+v; want calls, no errors, both rounds' time", o.Name, o)
		}
	}
	if got := strings.Join(names, ","); got != "ping,unread,receipts,ticks" {
		t.Errorf("ops %s", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gets["receipts"] == 0 || f.gets["ticks"] == 0 || f.gets["unread"] == 0 {
		t.Errorf("GETs %v", f.gets)
	}
	if res.ChannelErrors != 0 || res.ChannelMarks == 0 || f.heads["rb"] < 20+res.ChannelMarks {
		t.Errorf("channel activity: %d marks, %d errors, head %d", res.ChannelMarks, res.ChannelErrors, f.heads["rb"])
	}
}
