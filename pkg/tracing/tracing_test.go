package tracing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/tracing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestSetupOffWithoutEndpoint(t *testing.T) {
	t.Parallel()
	for name, vars := range map[string]map[string]string{
		"no endpoint":   {"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"exporter none": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"},
		"sdk disabled":  {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces", "OTEL_SDK_DISABLED": "true"},
	} {
		tr, err := tracing.Setup(context.Background(), tracing.Config{ServiceName: "s", SampleRatio: 1, Getenv: env(vars)})
		require.NoError(t, err, name)
		require.False(t, tr.Enabled(), name)
		_, span := tr.Provider().Tracer("t").Start(context.Background(), "x")
		require.False(t, span.IsRecording(), name)
		require.NoError(t, tr.Shutdown(context.Background()))
	}
	var nilTracing *tracing.Tracing
	require.False(t, nilTracing.Enabled())
	require.NoError(t, nilTracing.InstrumentRedis(nil))
}

func TestSetupRefusesBadConfig(t *testing.T) {
	t.Parallel()
	_, err := tracing.Setup(context.Background(), tracing.Config{SampleRatio: 2})
	require.ErrorContains(t, err, "sample ratio")
	_, err = tracing.Setup(context.Background(), tracing.Config{SampleRatio: 1,
		Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})})
	require.ErrorContains(t, err, "http/json")
	for _, proto := range []string{"grpc", "http/protobuf"} {
		tr, err := tracing.Setup(context.Background(), tracing.Config{SampleRatio: tracing.SampleRatioFromEnv,
			Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": proto})})
		require.NoError(t, err, proto)
		require.True(t, tr.Enabled(), proto)
		require.NoError(t, tr.Shutdown(context.Background()))
	}
}

// TestSampleRatio: the ratio samples the traces started here; a sampled
// caller's trace is followed whatever the ratio (parent-based).
func TestSampleRatio(t *testing.T) {
	t.Parallel()
	tr, err := tracing.Setup(context.Background(), tracing.Config{SampleRatio: 0,
		Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"})})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	_, root := tr.Provider().Tracer("t").Start(context.Background(), "root")
	require.False(t, root.SpanContext().IsSampled(), "ratio 0 samples no root")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	_, child := tr.Provider().Tracer("t").Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "child")
	require.True(t, child.SpanContext().IsSampled(), "a sampled parent is followed")
}

func recorder(t *testing.T) (*tracing.Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), rec
}

func TestRecordTraceContext(t *testing.T) {
	t.Parallel()
	tr, _ := recorder(t)
	recs := []*kgo.Record{{Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: event.HeaderReason, Value: []byte("r")}}}, {}}

	// Untraced: no header at all.
	tracing.Inject(context.Background(), recs)
	require.Len(t, recs[0].Headers, 1)
	require.Empty(t, recs[1].Headers)
	require.False(t, tracing.SpanContextOf(recs[1]).IsValid())

	ctx, span := tr.Provider().Tracer("t").Start(context.Background(), "call")
	tracing.Inject(ctx, recs)
	span.End()
	for _, r := range recs {
		require.Len(t, event.HeaderValue(r, event.HeaderTraceParent), 55)
		sc := tracing.SpanContextOf(r)
		require.True(t, sc.IsRemote())
		require.Equal(t, span.SpanContext().TraceID(), sc.TraceID())
		require.Equal(t, span.SpanContext().SpanID(), sc.SpanID())
	}
	require.Equal(t, "r", event.HeaderValue(recs[0], event.HeaderReason), "other headers stay")
	// Injecting again replaces, never duplicates.
	tracing.Inject(ctx, recs)
	require.Len(t, recs[1].Headers, 1)

	// A dead letter keeps its source's trace context.
	dl := event.DeadLetter(recs[1], "dlt", "bad")
	require.Equal(t, span.SpanContext().TraceID(), tracing.SpanContextOf(dl).TraceID())
	require.Equal(t, span.SpanContext().TraceID().String(), tracing.TraceID(tracing.Extract(context.Background(), dl)))
}

// TestChildOnly: the client libraries' spans start only inside a span.
func TestChildOnly(t *testing.T) {
	t.Parallel()
	tr, rec := recorder(t)
	lib := tracing.ChildOnly(tr.Provider()).Tracer("lib")
	_, orphan := lib.Start(context.Background(), "orphan")
	require.False(t, orphan.IsRecording())
	orphan.End()
	unsampled := trace.ContextWithRemoteSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Remote: true}))
	_, skipped := lib.Start(unsampled, "under an unsampled parent")
	require.False(t, skipped.IsRecording())
	skipped.End()
	ctx, parent := tr.Provider().Tracer("t").Start(context.Background(), "parent")
	_, child := lib.Start(ctx, "child")
	require.True(t, child.IsRecording())
	child.End()
	parent.End()
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	require.ElementsMatch(t, []string{"child", "parent"}, names)
}
