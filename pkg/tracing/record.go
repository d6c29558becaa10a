package tracing

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/event"
)

// recordPropagator writes the trace context, and only it, onto records:
// baggage is a caller's and unbounded (up to 8 KiB by W3C), while a record
// must stay within the topic's and the spool's bounds.
var recordPropagator = propagation.TraceContext{}

// RecordCarrier reads and writes a record's headers as a propagation
// carrier (event.HeaderTraceParent, event.HeaderTraceState).
type RecordCarrier struct{ Record *kgo.Record }

var _ propagation.TextMapCarrier = RecordCarrier{}

// Get is the first header named key, or "".
func (c RecordCarrier) Get(key string) string {
	for _, h := range c.Record.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces the header named key, or appends it.
func (c RecordCarrier) Set(key, value string) {
	for i, h := range c.Record.Headers {
		if h.Key == key {
			c.Record.Headers[i].Value = []byte(value)
			return
		}
	}
	c.Record.Headers = append(c.Record.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// Keys are the header names.
func (c RecordCarrier) Keys() []string {
	keys := make([]string, len(c.Record.Headers))
	for i, h := range c.Record.Headers {
		keys[i] = h.Key
	}
	return keys
}

// Inject writes the trace context of ctx onto recs (traceparent, and
// tracestate when there is one). Without a valid span context in ctx (tracing
// off, or a call that carried none) it does nothing: a record gains its
// header only when it belongs to a trace.
func Inject(ctx context.Context, recs []*kgo.Record) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	for _, r := range recs {
		recordPropagator.Inject(ctx, RecordCarrier{r})
	}
}

// Extract is ctx with the remote span context a record carries (as the
// parent of the spans started from it); ctx as it is without one.
func Extract(ctx context.Context, r *kgo.Record) context.Context {
	if event.HeaderValue(r, event.HeaderTraceParent) == "" {
		return ctx
	}
	return recordPropagator.Extract(ctx, RecordCarrier{r})
}

// SpanContextOf is the span context a record carries; invalid without one.
func SpanContextOf(r *kgo.Record) trace.SpanContext {
	return trace.SpanContextFromContext(Extract(context.Background(), r))
}

// TraceID is the trace id of ctx's span context in hex, or "".
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// LogKey is the log field of a trace id.
const LogKey = "trace_id"

// Logger is log with the trace id of ctx as a field (LogKey), or log as it
// is when ctx belongs to no trace: every line a request logs carries it.
func Logger(ctx context.Context, log *zap.Logger) *zap.Logger {
	if id := TraceID(ctx); id != "" {
		return log.With(zap.String(LogKey, id))
	}
	return log
}
