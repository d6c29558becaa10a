package persister

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/readstate/receipts/pkg/tracing"
)

// TestWindowSpanLinksBounded: a window's span links to each traced
// record's span, at most MaxLinks, and counts the rest; untraced records
// add nothing, and with tracing off no span starts.
func TestWindowSpanLinksBounded(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tracing.New(tp)

	w := &window{}
	var want []trace.SpanContext
	for i := range MaxLinks + 5 {
		ctx, span := tp.Tracer("caller").Start(context.Background(), "call")
		r := &kgo.Record{Key: []byte("k")}
		tracing.Inject(ctx, []*kgo.Record{r})
		span.End()
		w.recs = append(w.recs, r)
		if i%10 == 0 {
			w.recs = append(w.recs, &kgo.Record{Key: []byte("untraced")})
		}
		want = append(want, span.SpanContext())
	}
	p := &Persister{cfg: Config{Tracing: tr}, tracer: tr.Provider().Tracer(tracerName)}
	_, end := p.windowSpan(context.Background(), w, "linger")
	end(errors.New("postgres down"))

	var win sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "persister.window" {
			win = s
		}
	}
	require.NotNil(t, win)
	require.False(t, win.Parent().IsValid(), "a window is a root: it serves many calls")
	require.Len(t, win.Links(), MaxLinks)
	for i, l := range win.Links() {
		require.Equal(t, want[i].TraceID(), l.SpanContext.TraceID())
		require.Equal(t, want[i].SpanID(), l.SpanContext.SpanID())
	}
	attrs := attribute.NewSet(win.Attributes()...)
	dropped, _ := attrs.Value("receipts.links_dropped")
	require.Equal(t, int64(5), dropped.AsInt64())
	traced, _ := attrs.Value("receipts.records_traced")
	require.Equal(t, int64(MaxLinks+5), traced.AsInt64())
	require.Equal(t, "Error", win.Status().Code.String())

	// Off: nothing starts, the context is the caller's.
	before := len(rec.Ended())
	off := &Persister{tracer: tracing.Off().Provider().Tracer(tracerName)}
	ctx, end := off.windowSpan(context.Background(), w, "linger")
	end(nil)
	require.False(t, trace.SpanContextFromContext(ctx).IsValid())
	require.Len(t, rec.Ended(), before)
}
