// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables and carries a trace across the pipeline: the W3C
// trace context (traceparent, tracestate) as headers of a Kafka record
// (RecordCarrier, Inject, Extract), the trace id as a log field
// (LogField) and as the request id of an API error.
//
// Tracing is off unless an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, and
// OTEL_TRACES_EXPORTER is not "none"): Setup then returns Off, whose
// provider is OpenTelemetry's no-op and whose Enabled is false, so the
// services install no instrumentation at all and pay nothing for it.
package tracing

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// SampleRatioFromEnv is Config.SampleRatio's default: the sampler is the
// one OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG name (OpenTelemetry's
// default: parent-based, always on).
const SampleRatioFromEnv = -1

// Config configures Setup.
type Config struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME (or
	// OTEL_RESOURCE_ATTRIBUTES) sets it.
	ServiceName string
	// Version is service.version.
	Version string
	// SampleRatio, from 0 to 1, samples that share of the traces that
	// start here; a call that arrives with a trace context follows its
	// caller's decision (parent-based). SampleRatioFromEnv (the flag's
	// default) leaves the choice to OTEL_TRACES_SAMPLER(_ARG).
	SampleRatio float64
	// Getenv reads the environment; defaults to os.Getenv. The OTLP
	// exporter itself reads the OTEL_EXPORTER_OTLP_* variables from the
	// process environment.
	Getenv func(string) string
}

// RegisterFlags registers --trace-sample-ratio.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	if c.SampleRatio == 0 {
		c.SampleRatio = SampleRatioFromEnv
	}
	fs.Float64Var(&c.SampleRatio, "trace-sample-ratio", c.SampleRatio,
		"share of the traces started here that are sampled, 0 to 1 (parent-based: a call with a sampled traceparent is traced); -1: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG decide. Tracing is on only with OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set")
}

// Validate checks the ratio (cli.Validator is not needed: Setup calls it).
func (c Config) Validate() error {
	if c.SampleRatio != SampleRatioFromEnv && (c.SampleRatio < 0 || c.SampleRatio > 1) {
		return fmt.Errorf("trace sample ratio: must be from 0 to 1 (or -1), got %v", c.SampleRatio)
	}
	return nil
}

// Tracing is the process's tracer provider; the zero value and nil are
// Off.
type Tracing struct {
	sdk *sdktrace.TracerProvider
}

// Off is tracing turned off: the no-op provider.
func Off() *Tracing { return &Tracing{} }

// Enabled reports whether spans are recorded and exported: only then do
// the services install their instrumentation.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Provider is the tracer provider (the no-op one when off).
func (t *Tracing) Provider() trace.TracerProvider {
	if !t.Enabled() {
		return noop.NewTracerProvider()
	}
	return t.sdk
}

// Shutdown flushes the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// Propagator is the W3C trace context and baggage, what every service
// reads from and writes into the calls it serves and makes.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Setup builds the tracer provider the environment describes: an OTLP
// exporter (OTEL_EXPORTER_OTLP_PROTOCOL or _TRACES_PROTOCOL: http/protobuf,
// the default, or grpc) behind a batching span processor, the sampler of
// cfg, and the resource of OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// over cfg's name and version. Without an endpoint it returns Off.
func Setup(ctx context.Context, cfg Config) (*Tracing, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") || strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return Off(), nil
	}
	exp, err := exporter(ctx, getenv)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", cfg.ServiceName), attribute.String("service.version", cfg.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("building the trace resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if cfg.SampleRatio != SampleRatioFromEnv {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))))
	}
	return &Tracing{sdk: sdktrace.NewTracerProvider(opts...)}, nil
}

// exporter is the OTLP exporter of the protocol the environment names.
func exporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating the OTLP/HTTP trace exporter: %w", err)
		}
		return exp, nil
	case "grpc":
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating the OTLP/gRPC trace exporter: %w", err)
		}
		return exp, nil
	}
	return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", proto)
}

// ChildOnly is tp for the client libraries (Redis, Postgres) whose calls
// are worth a span only inside a traced request or window: a call whose
// context holds no sampled span context (a background loop's, or a
// request the sampler left out) starts none, and costs no span.
func ChildOnly(tp trace.TracerProvider) trace.TracerProvider { return childOnlyProvider{tp} }

type childOnlyProvider struct{ trace.TracerProvider }

func (p childOnlyProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childOnlyTracer{p.TracerProvider.Tracer(name, opts...)}
}

type childOnlyTracer struct{ trace.Tracer }

func (t childOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.Tracer.Start(ctx, name, opts...)
}

// New is tracing on tp (a test's, or an embedding program's own SDK
// provider); nil is Off.
func New(tp *sdktrace.TracerProvider) *Tracing { return &Tracing{sdk: tp} }

// InstrumentRedis traces rdb's commands (their names, never their
// arguments: keys hold user ids) as children of the caller's span; a
// command outside any span starts none. Off: nothing.
func (t *Tracing) InstrumentRedis(rdb redis.UniversalClient) error {
	if !t.Enabled() {
		return nil
	}
	// No caller attributes: redisotel would walk the stack of every
	// command, sampled or not.
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(ChildOnly(t.sdk)),
		redisotel.WithDBStatement(false), redisotel.WithDialFilter(true), redisotel.WithCallerEnabled(false)); err != nil {
		return fmt.Errorf("tracing redis: %w", err)
	}
	return nil
}
