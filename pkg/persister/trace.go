package persister

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/readstate/receipts/pkg/tracing"
)

// MaxLinks bounds the links of a window's span: one per record that
// carries a trace context, in poll order, the rest counted in
// receipts.links_dropped.
const MaxLinks = 128

// tracerName names the persister's spans.
const tracerName = "github.com/readstate/receipts/pkg/persister"

// windowSpan starts the span of a window (a root: a window serves many
// calls, each linked) when tracing is on; otherwise it returns ctx and a
// no-op end, and looks at no record.
func (p *Persister) windowSpan(ctx context.Context, w *window, trigger string) (context.Context, func(error)) {
	if !p.cfg.Tracing.Enabled() {
		return ctx, func(error) {}
	}
	var links []trace.Link
	traced, dropped := 0, 0
	for _, r := range w.recs {
		sc := tracing.SpanContextOf(r)
		if !sc.IsValid() {
			continue
		}
		traced++
		if len(links) == MaxLinks {
			dropped++
			continue
		}
		links = append(links, trace.Link{SpanContext: sc})
	}
	ctx, span := p.tracer.Start(ctx, "persister.window", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("receipts.trigger", trigger),
			attribute.Int("receipts.records", w.len()),
			attribute.Int("receipts.rows", w.rowCount()),
			attribute.Int("receipts.records_traced", traced),
			attribute.Int("receipts.links_dropped", dropped),
		))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "window not settled")
		}
		span.End()
	}
}
