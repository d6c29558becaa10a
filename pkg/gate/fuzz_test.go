package gate_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/gate/server"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/receipt"
)

// recordingWriter is a Producer that keeps the last call's records and
// acks them as Kafka, with no broker.
type recordingWriter struct {
	calls int
	recs  []*kgo.Record
}

func (w *recordingWriter) Write(_ context.Context, recs []*kgo.Record) (producer.Durability, error) {
	w.calls++
	w.recs = recs
	return producer.Kafka, nil
}

func (*recordingWriter) Refuse([]*kgo.Record) error  { return nil }
func (*recordingWriter) Spooling() bool              { return false }
func (*recordingWriter) Ready(context.Context) error { return nil }
func (*recordingWriter) Topic() string               { return event.TopicDefault }
func (*recordingWriter) CallBound() time.Duration    { return time.Second }

var errNoRedis = errors.New("no redis in the fuzz test")

// refuseAll is a redis.Limiter that refuses every command.
type refuseAll struct{}

func (refuseAll) Allow() error       { return errNoRedis }
func (refuseAll) ReportResult(error) {}

// fuzzGate is a gate whose backends cost nothing: Redis fails at once (no
// dial), Postgres is never reached by writes, Kafka is the recording
// writer. The HTTP path (vanguard REST transcoding, body limit, connect,
// validation, the write path) is the real one.
func fuzzGate(t testing.TB) (*server.Server, *recordingWriter) {
	rdb := redis.NewClient(&redis.Options{
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errNoRedis
		},
		Limiter:    refuseAll{}, // fail every command before it dials
		MaxRetries: -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	pg, err := pgstore.Open(context.Background(), pgstore.Config{URL: "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1"})
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	w := &recordingWriter{}
	g, err := gate.New(gate.Config{Producer: w, Redis: rdb, Postgres: pg})
	require.NoError(t, err)
	s, err := server.New(server.Config{}, g)
	require.NoError(t, err)
	return s, w
}

// FuzzMarkReceiptsJSON sends arbitrary bytes as the body of
// POST /v1/receipts:mark through the gate's real handler. It must never
// panic or answer 5xx; an accepted call wrote exactly its items, each valid
// (ids, seq > 0, a kind), and a refused call wrote nothing.
func FuzzMarkReceiptsJSON(f *testing.F) {
	for _, seed := range []string{
		`{"receipts": [{"user_id": "alice", "channel_id": "general", "kind": "READ", "seq": "12", "message_id": "m12", "device_id": "phone"}]}`,
		`{"receipts": [{"userId": "bob", "channelId": "c", "kind": "DELIVERED", "seq": 3}, {"user_id": "bob", "channel_id": "d", "kind": 1, "seq": 1}]}`,
		`{"receipts": [{"user_id": "u", "channel_id": "c", "kind": "READ", "seq": 9223372036854775808}]}`,
		`{"receipts": [{"user_id": "u:x", "channel_id": "c", "kind": "READ", "seq": 1}]}`,
		`{"receipts": [{"user_id": "@a:x.org", "channel_id": "!r%:x/y", "kind": "READ", "seq": 1, "message_id": "$m:x"}]}`,
		`{"receipts": [{"user_id": ":a", "channel_id": "c", "kind": "READ", "seq": 1}]}`,
		`{"receipts": [{"user_id": "u",`,
		`{"receipts": []}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	g, w := fuzzGate(f)
	h := g.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		w.calls, w.recs = 0, nil
		req := httptest.NewRequest(http.MethodPost, "/v1/receipts:mark", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body.Bytes())
		}
		if rec.Code != http.StatusOK {
			if w.calls != 0 {
				t.Fatalf("status %d but %d records were written", rec.Code, len(w.recs))
			}
			return
		}
		if w.calls != 1 {
			t.Fatalf("accepted with %d writes", w.calls)
		}
		var resp receiptsv1.MarkReceiptsResponse
		if err := protojson.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("decoding answer %s: %v", rec.Body.Bytes(), err)
		}
		if len(resp.GetResults()) != len(w.recs) || len(w.recs) == 0 || len(w.recs) > gate.MaxBatchItemsDefault {
			t.Fatalf("%d results for %d records", len(resp.GetResults()), len(w.recs))
		}
		for i, r := range w.recs {
			st, err := event.Decode(r) // validates the event too
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			for _, err := range []error{
				receipt.ValidateID("user_id", st.Key.User),
				receipt.ValidateID("channel_id", st.Key.Channel),
				receipt.ValidateSeq("seq", st.Delivered.Position.Seq), // every kind sets delivered
				receipt.ValidateOptionalID("message_id", st.Delivered.MessageID),
				receipt.ValidateOptionalID("device_id", st.DeviceID),
			} {
				if err != nil {
					t.Fatalf("record %d accepted but invalid: %v", i, err)
				}
			}
			if string(r.Key) != st.Key.KafkaKey() {
				t.Fatalf("record %d: key %q for %s", i, r.Key, st.Key.KafkaKey())
			}
			if !st.Read.Position.IsZero() && st.Read.Position != st.Delivered.Position {
				t.Fatalf("record %d: READ must set delivered to the same position: %+v", i, st)
			}
		}
	})
}

// TestFuzzCorpusOutcomes runs the committed seed corpus through the fuzz
// gate and checks each entry's outcome by its name: valid_* is accepted
// (so the harness does reach the write path), everything else is refused
// with 4xx.
func TestFuzzCorpusOutcomes(t *testing.T) {
	t.Parallel()
	g, w := fuzzGate(t)
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzMarkReceiptsJSON", "*"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 10)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		quoted, ok := strings.CutPrefix(string(data), "go test fuzz v1\n[]byte(")
		require.True(t, ok, file)
		quoted, ok = strings.CutSuffix(quoted, ")\n")
		require.True(t, ok, file)
		body, err := strconv.Unquote(quoted)
		require.NoError(t, err, file)

		w.calls = 0
		req := httptest.NewRequest(http.MethodPost, "/v1/receipts:mark", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		g.Handler().ServeHTTP(rec, req)
		name := filepath.Base(file)
		if strings.HasPrefix(name, "valid_") {
			require.Equal(t, http.StatusOK, rec.Code, "%s: %s", name, rec.Body.Bytes())
			require.Equal(t, 1, w.calls, name)
		} else {
			require.GreaterOrEqual(t, rec.Code, 400, "%s: %s", name, rec.Body.Bytes())
			require.Less(t, rec.Code, 500, "%s: %s", name, rec.Body.Bytes())
			require.Zero(t, w.calls, name)
		}
	}
}
