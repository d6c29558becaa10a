package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/tracing"
)

// BenchmarkMarkInstrumentation isolates what tracing adds to one mark on
// the REST fast path, with no network, Redis or Kafka around it: the HTTP
// layer (traceHTTP), the fast path's span naming and counts, and the
// trace context put on the mark's record. "none" is the bare handler
// (no instrumentation at all), "off" the code as it runs with tracing off,
// "on-1pct" and "on-100pct" with the sampler at those ratios (spans go to
// a discarding processor: the export is not measured here; BenchmarkMarks
// measures it end to end).
func BenchmarkMarkInstrumentation(b *testing.B) {
	req := &receiptsv1.MarkRequest{UserId: "ann", ChannelId: "c1", Seq: 3}
	mark := func(w http.ResponseWriter, r *http.Request) {
		fastSpan(r.Context(), "MarkRead", req)
		recs := []*kgo.Record{{Key: []byte("ann:c1"), Value: []byte("v")}}
		tracing.Inject(r.Context(), recs)
		sink = recs
		fastDone(r.Context(), nil)
		w.WriteHeader(http.StatusOK)
	}
	bare := func(w http.ResponseWriter, r *http.Request) {
		sink = []*kgo.Record{{Key: []byte("ann:c1"), Value: []byte("v")}}
		w.WriteHeader(http.StatusOK)
	}
	withRatio := func(ratio float64) *tracing.Tracing {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tracing.New(tp)
	}
	for _, v := range []struct {
		name    string
		handler http.Handler
	}{
		{"none", http.HandlerFunc(bare)},
		{"off", (&Server{}).traceHTTP(http.HandlerFunc(mark))},
		{"on-1pct", (&Server{cfg: Config{Tracing: withRatio(0.01)}}).traceHTTP(http.HandlerFunc(mark))},
		{"on-100pct", (&Server{cfg: Config{Tracing: withRatio(1)}}).traceHTTP(http.HandlerFunc(mark))},
	} {
		b.Run(v.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "/v1/users/ann/channels/c1/read", nil)
			w := &nullWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				v.handler.ServeHTTP(w, r)
			}
		})
	}
}

// sink keeps the benchmark's record alive, as the producer would.
var sink []*kgo.Record

// discard is a span processor that drops every span.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// nullWriter is a ResponseWriter that keeps nothing.
type nullWriter struct{ h http.Header }

func (w *nullWriter) Header() http.Header         { return w.h }
func (w *nullWriter) Write(b []byte) (int, error) { return io.Discard.Write(b) }
func (w *nullWriter) WriteHeader(int)             {}
