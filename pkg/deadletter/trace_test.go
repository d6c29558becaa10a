package deadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/tracing"
)

// TestRepairContinuesTheRecordsTrace: a dead letter keeps the trace
// context of its source record, and its repair's span is a child of it.
func TestRepairContinuesTheRecordsTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	bd := setup(t)
	b := kafkatest.New(t)

	src := encode(t, state("u1", "c1", 5, true))
	src.Topic = b.Topic
	callCtx, call := tp.Tracer("gateway").Start(context.Background(), "mark")
	tracing.Inject(callCtx, []*kgo.Record{src})
	call.End()
	dl := event.DeadLetter(src, b.DLTTopic, "rejected by postgres: check")
	dl.Partition = 0
	produce(t, b, dl)

	startConsumer(t, bd, b, "reconciler-"+kafkatest.Suffix(), func(c *deadletter.Config) { c.Tracing = tracing.New(tp) })
	var repair sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "dlt-reconciler.repair" {
				repair = s
				return true
			}
		}
		return false
	}, waitFor, 20*time.Millisecond)
	require.Equal(t, call.SpanContext().TraceID(), repair.SpanContext().TraceID())
	require.Equal(t, call.SpanContext().SpanID(), repair.Parent().SpanID(), "a child of the record's span")
	require.True(t, repair.Parent().IsRemote())
}
