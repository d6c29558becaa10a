package server

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/tracing"
)

// tracerName names the spans the API server starts itself.
const tracerName = "github.com/readstate/receipts/pkg/gate/server"

// Span attributes of a call: how many items, distinct users and distinct
// channels it names (counts only: ids never go into a span).
const (
	attrItems    = attribute.Key("receipts.items")
	attrUsers    = attribute.Key("receipts.users")
	attrChannels = attribute.Key("receipts.channels")
)

// traceHTTP is the outermost layer of the API: it echoes a caller's
// X-Request-Id (and keeps it for the refusals' RequestInfo) and, with
// tracing on, reads the caller's trace context (W3C traceparent) and
// starts the server span of every request that is not an RPC (REST, the
// fast path among it, and the watch's server-sent events): an RPC's span
// is otelconnect's, a child of the same context. A REST call vanguard
// transcodes gets both: this span, and the RPC's under it.
func (s *Server) traceHTTP(next http.Handler) http.Handler {
	on := s.cfg.Tracing.Enabled()
	tracer := s.cfg.Tracing.Provider().Tracer(tracerName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if id := r.Header.Get(apierr.RequestIDHeader); id != "" && apierr.ValidRequestID(id) {
			w.Header().Set(apierr.RequestIDHeader, id)
			ctx = apierr.ContextWithRequestID(ctx, id)
		}
		if !on {
			if ctx != r.Context() {
				r = r.WithContext(ctx)
			}
			next.ServeHTTP(w, r)
			return
		}
		ctx = tracing.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		if strings.HasPrefix(r.URL.Path, rpcPathPrefix) || r.Method == http.MethodOptions {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		// The route, not the path: a path holds ids. The fast path names
		// the span after its RPC.
		ctx, span := tracer.Start(ctx, "REST "+r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// statusWriter notes the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on (server-sent events).
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// interceptors are the connect interceptors of tracing: with tracing on,
// otelconnect's server span (the caller's context trusted: the gateway
// serves the project's own services) outermost, then callInfo.
func (s *Server) tracingInterceptors() ([]connect.Interceptor, error) {
	var out []connect.Interceptor
	if s.cfg.Tracing.Enabled() {
		otel, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(s.cfg.Tracing.Provider()),
			otelconnect.WithPropagator(tracing.Propagator), otelconnect.WithTrustRemote(), otelconnect.WithoutMetrics())
		if err != nil {
			return nil, err
		}
		out = append(out, otel)
	}
	return append(out, s.callInfo()), nil
}

// callInfo puts the counts of a call on its span (when it records), the
// request's RequestInfo on its refusal, and logs the refusal (debug; warn
// for the server's own failures) with its trace id: a unary call's error,
// and the error that ends a server stream (WatchChannels), refused before
// its first event or ended later.
func (s *Server) callInfo() connect.Interceptor { return callInfo{s} }

type callInfo struct{ s *Server }

func (c callInfo) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			if msg, ok := req.Any().(proto.Message); ok {
				annotate(span, msg)
			}
		}
		resp, err := next(ctx, req)
		if err != nil {
			err = apierr.WithRequestInfo(ctx, err)
			c.s.logRefusal(ctx, req.Spec().Procedure, err)
		}
		return resp, err
	}
}

// WrapStreamingClient: the server makes no calls.
func (callInfo) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c callInfo) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			conn = &annotatingConn{StreamingHandlerConn: conn, span: span}
		}
		err := next(ctx, conn)
		if err == nil {
			return nil
		}
		err = apierr.WithRequestInfo(ctx, err)
		// A stream whose caller went away ended, nobody was refused.
		if ctx.Err() == nil {
			c.s.logRefusal(ctx, conn.Spec().Procedure, err)
		}
		return err
	}
}

// annotatingConn puts the counts of a stream's first request message on
// the stream's span.
type annotatingConn struct {
	connect.StreamingHandlerConn
	span trace.Span
	done bool
}

func (c *annotatingConn) Receive(m any) error {
	err := c.StreamingHandlerConn.Receive(m)
	if err == nil && !c.done {
		c.done = true
		if msg, ok := m.(proto.Message); ok {
			annotate(c.span, msg)
		}
	}
	return err
}

// logRefusal logs a refused call with the request's trace id: at debug
// level, or warn when the server failed (Internal, Unknown, DataLoss).
func (s *Server) logRefusal(ctx context.Context, procedure string, err error) {
	lvl := zapcore.DebugLevel
	switch connect.CodeOf(err) {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
		lvl = zapcore.WarnLevel
	}
	ce := s.log.Check(lvl, "call refused")
	if ce == nil {
		return
	}
	ce.Write(zap.String("rpc", procedure[strings.LastIndexByte(procedure, '/')+1:]),
		zap.Stringer("code", connect.CodeOf(err)), zap.String("reason", string(apierr.ReasonOf(err))),
		zap.String(tracing.LogKey, tracing.TraceID(ctx)), zap.String("request_id", apierr.RequestID(ctx)), zap.Error(err))
}

// writeREST answers a REST call with err and the request's RequestInfo.
func (s *Server) writeREST(w http.ResponseWriter, r *http.Request, err error) {
	err = apierr.WithRequestInfo(r.Context(), err)
	s.logRefusal(r.Context(), r.URL.Path, err)
	apierr.WriteREST(w, err)
}

// fastSpan names the HTTP layer's span of a fast-path call after its RPC
// and adds the call's counts; it ends with the HTTP layer.
func fastSpan(ctx context.Context, rpc string, msg proto.Message) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetName("receipts.v1.ReceiptService/" + rpc)
	span.SetAttributes(attribute.String("rpc.system", "connect_rpc"), attribute.String("rpc.service", "receipts.v1.ReceiptService"),
		attribute.String("rpc.method", rpc), attribute.Bool("receipts.fast_rest", true))
	annotate(span, msg)
}

// fastDone records a fast-path call's result code on its span.
func fastDone(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || err == nil {
		return
	}
	span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", connect.CodeOf(err).String()))
	switch connect.CodeOf(err) {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss, connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeUnimplemented:
		span.SetStatus(codes.Error, connect.CodeOf(err).String())
	}
}

// annotate puts msg's counts on span: its items (the longest repeated
// message field), and the distinct user and channel ids it names.
func annotate(span trace.Span, msg proto.Message) {
	users, channels := map[string]struct{}{}, map[string]struct{}{}
	countIDs(msg.ProtoReflect(), users, channels, 0)
	span.SetAttributes(attrItems.Int(max(batchItems(msg.ProtoReflect()), 1)), attrUsers.Int(len(users)), attrChannels.Int(len(channels)))
}

// maxIDDepth bounds the walk of countIDs (the API's messages nest two
// levels deep).
const maxIDDepth = 4

// countIDs adds the values of m's user and channel id fields (user_id,
// user_ids, channel_id, channel_ids, at any depth up to maxIDDepth) to
// the sets.
func countIDs(m protoreflect.Message, users, channels map[string]struct{}, depth int) {
	if depth > maxIDDepth {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		var set map[string]struct{}
		switch fd.Name() {
		case "user_id", "user_ids":
			set = users
		case "channel_id", "channel_ids":
			set = channels
		}
		switch {
		case set != nil && fd.Kind() == protoreflect.StringKind && fd.IsList():
			for i := range v.List().Len() {
				set[v.List().Get(i).String()] = struct{}{}
			}
		case set != nil && fd.Kind() == protoreflect.StringKind && !fd.IsMap():
			set[v.String()] = struct{}{}
		case fd.Message() != nil && fd.IsList():
			for i := range v.List().Len() {
				countIDs(v.List().Get(i).Message(), users, channels, depth+1)
			}
		case fd.Message() != nil && !fd.IsMap():
			countIDs(v.Message(), users, channels, depth+1)
		}
		return true
	})
}
