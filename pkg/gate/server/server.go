package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"connectrpc.com/vanguard"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/lifecycle"
)

// rpcPathPrefix starts every gRPC, gRPC-Web and Connect path of the service;
// anything else that reaches the transcoder is REST.
const rpcPathPrefix = "/" + receiptsv1connect.ReceiptServiceName + "/"

// Server serves a gate's ReceiptService on one port (see the package doc).
// It is a lifecycle component: Run serves until its context ends, then
// drains.
type Server struct {
	cfg     Config
	gate    *gate.Gate
	log     *zap.Logger
	m       *metrics
	guard   *apiauth.Guard
	auth    authorizer
	handler http.Handler
	// serving is set while Serve serves.
	serving atomic.Bool
	// serveCtx is Serve's context: Ready fails the moment it ends (the
	// shutdown delay and the drain), not when Serve's goroutine gets
	// there, so gRPC health agrees with /readyz, whose runner sees the
	// same cancellation.
	serveCtx atomic.Pointer[context.Context]
}

// New fills defaults, validates cfg against the gate (all problems at
// once), and builds the HTTP handler. It starts nothing.
func New(cfg Config, g *gate.Gate) (*Server, error) {
	cfg = cfg.withDefaults(g.MaxBatchItems())
	if err := cfg.validate(g.MaxBatchItems(), g.CallBound()); err != nil {
		return nil, fmt.Errorf("configuring api server: %w", err)
	}
	s := &Server{cfg: cfg, gate: g, log: cfg.Logger.Named("gate"), m: newMetrics(cfg.Registerer), auth: authorizer{members: g}}
	var err error
	if s.handler, err = s.buildHandler(); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler serves the API: the ReceiptService as gRPC, gRPC-Web, Connect and
// REST (HTTP/JSON), gRPC health, and gRPC reflection (v1 and v1alpha),
// every route behind the API guard (authentication and per-client rate
// limits, pkg/apiauth), and, unguarded, the REST contract at GET
// /openapi.json; with CORSAllowedOrigins, CORS for those origins in front
// of all of it. Serve it over HTTP/1.1 and HTTP/2 (h2c, or h2 over TLS:
// gRPC needs HTTP/2), as HTTPServer does.
func (s *Server) Handler() http.Handler { return s.handler }

// Serving reports whether Serve is serving.
func (s *Server) Serving() bool { return s.serving.Load() }

// Ready reports whether the API can accept durable writes: it serves, is
// not stopping, and the gate is ready (gate.Gate.Ready).
func (s *Server) Ready(ctx context.Context) error {
	if !s.serving.Load() {
		return errors.New("api not serving")
	}
	if c := s.serveCtx.Load(); c != nil && (*c).Err() != nil {
		return errors.New("api shutting down")
	}
	return s.gate.Ready(ctx)
}

// Status is the guard's: what auth file failed to reload, if one did
// (lifecycle.Describer: a line of /readyz, which stays ready).
func (s *Server) Status() string { return s.guard.Status() }

var _ lifecycle.Describer = (*Server)(nil)

func (s *Server) buildHandler() (http.Handler, error) {
	var err error
	if s.guard, err = apiauth.New(s.cfg.Auth, s.cfg.Addr); err != nil {
		return nil, fmt.Errorf("configuring API authentication: %w", err)
	}
	otelIcs, err := s.tracingInterceptors()
	if err != nil {
		return nil, fmt.Errorf("configuring tracing: %w", err)
	}
	path, svc := receiptsv1connect.NewReceiptServiceHandler(watching{s.gate, s},
		connect.WithReadMaxBytes(int(s.cfg.MaxBodyBytes)),
		connect.WithInterceptors(append(otelIcs, s.m.interceptor(), s.auth, chargeEvents())...),
	)
	tc, err := vanguard.NewTranscoder([]*vanguard.Service{
		vanguard.NewService(path, svc, vanguard.WithMaxMessageBufferBytes(uint32(s.cfg.MaxBodyBytes))),
	})
	if err != nil {
		return nil, fmt.Errorf("building transcoder: %w", err)
	}
	reflector := grpcreflect.NewStaticReflector(receiptsv1connect.ReceiptServiceName, grpchealth.HealthV1ServiceName)
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(healthChecker{s}))
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle("GET "+watchSSEPath, http.HandlerFunc(s.serveWatchSSE))
	mux.Handle("/", s.limitREST(s.streamDeadlines(tc)))
	// The contract is served outside the guard: it is public metadata,
	// the same for every caller and holding no data (what the proto
	// already tells), and callers and their tools read it before they
	// hold credentials. An answer from memory needs no rate limit.
	root := http.NewServeMux()
	root.Handle("GET "+OpenAPIPath, openAPIHandler())
	root.Handle("/", s.guard.Wrap(mux))
	traced := s.traceHTTP(root)
	if len(s.cfg.CORSAllowedOrigins) == 0 {
		return traced, nil
	}
	// Outside the guard: a preflight carries no credentials.
	c, err := newCORS(s.cfg.CORSAllowedOrigins)
	if err != nil {
		return nil, err
	}
	return c.Handler(traced), nil
}

// chargeEvents charges a call's client the rest of its cost in events: the
// guard charged one at the door, a batch costs one per item (the longest
// repeated message field: MarkReceipts' receipts, NotifyMessages'
// messages), so a batch of 100 marks costs 100. A call over its client's
// limit is ResourceExhausted (HTTP 429) with Retry-After.
func chargeEvents() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if msg, ok := req.Any().(proto.Message); ok {
				if n := batchItems(msg.ProtoReflect()); n > 1 {
					if err := apiauth.Charge(ctx, n-1); err != nil {
						return nil, apiauth.RateLimited(err)
					}
				}
			}
			return next(ctx, req)
		}
	}
}

// batchItems is the length of m's longest repeated message field.
func batchItems(m protoreflect.Message) int {
	n := 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsList() && fd.Message() != nil {
			n = max(n, v.List().Len())
		}
		return true
	})
	return n
}

// limitREST bounds REST request bodies (and lets Connect unary calls without
// their protocol header through, see markConnectUnary). RPC protocols are bounded by
// connect.WithReadMaxBytes (ResourceExhausted); a REST body over
// MaxBodyBytes gets HTTP 413 with a JSON google.rpc.Status body (code 8,
// RESOURCE_EXHAUSTED, reason BODY_TOO_LARGE) like every other REST error,
// before any decoding. The
// body is read here in full (vanguard buffers REST bodies anyway), so a
// chunked body without Content-Length gets the same answer.
func (s *Server) limitREST(next http.Handler) http.Handler {
	limit := s.cfg.MaxBodyBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, rpcPathPrefix) {
			markConnectUnary(r)
			next.ServeHTTP(w, r)
			return
		}
		routeEscapedPath(r)
		if r.Body == nil || r.Body == http.NoBody {
			if !s.serveFastREST(w, r, nil) {
				reasonedREST(next, w, r)
			}
			return
		}
		tooLarge := func() {
			apierr.WriteRESTStatus(w, http.StatusRequestEntityTooLarge, apierr.WithRequestInfo(r.Context(), apierr.New(connect.CodeResourceExhausted, apierr.BodyTooLarge,
				fmt.Errorf("request body is larger than the limit of %d bytes", limit), apierr.Limit(limit))))
		}
		if r.ContentLength > limit {
			tooLarge()
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				tooLarge()
				return
			}
			s.writeREST(w, r, apierr.New(connect.CodeInvalidArgument, apierr.MalformedRequest, fmt.Errorf("reading request body: %w", err)))
			return
		}
		// The fast path reads only valid JSON, so the syntax check below
		// is for the calls it declines.
		if s.serveFastREST(w, r, body) {
			return
		}
		// vanguard answers a malformed body of a route with path
		// parameters as Unknown (500): the caller's mistake is a 400.
		if len(body) > 0 && strings.Contains(r.Header.Get("Content-Type"), "json") && !json.Valid(body) {
			var syntax any
			err := json.Unmarshal(body, &syntax)
			s.writeREST(w, r, apierr.New(connect.CodeInvalidArgument, apierr.MalformedRequest, fmt.Errorf("request body is not valid JSON: %w", err)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		reasonedREST(next, w, r)
	})
}

// markConnectUnary adds the Connect-Protocol-Version header to a Connect
// unary POST that lacks it (curl -H 'Content-Type: application/json' -d …
// /receipts.v1.ReceiptService/MarkRead). connect-go accepts such calls, but
// vanguard would classify them as REST and answer 404.
func markConnectUnary(r *http.Request) {
	ct := r.Header.Get("Content-Type")
	if r.Method != http.MethodPost || r.Header.Get("Connect-Protocol-Version") != "" ||
		!strings.HasPrefix(ct, "application/") ||
		strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+") {
		return
	}
	r.Header.Set("Connect-Protocol-Version", "1")
}

// healthChecker answers gRPC health checks for the process and the
// ReceiptService from Ready.
type healthChecker struct{ s *Server }

func (h healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	switch req.Service {
	case "", receiptsv1connect.ReceiptServiceName:
	default:
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	if err := h.s.Ready(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// HTTPServer returns an http.Server for the API on cfg.Addr, with the
// configured timeouts: with a TLS certificate (Auth.CertFile), HTTP/1.1 and
// HTTP/2 over TLS (ALPN h2, http/1.1; mTLS when Auth.ClientCAFile is set);
// otherwise HTTP/1.1 and unencrypted HTTP/2 with prior knowledge (h2c,
// what gRPC clients speak without TLS).
func (s *Server) HTTPServer() *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if s.guard.TLSConfig() != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Addr:              s.cfg.Addr,
		Handler:           s.handler,
		TLSConfig:         s.guard.TLSConfig(),
		Protocols:         &protocols,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
	// Watch streams never end by themselves: ending them is what lets
	// Shutdown drain (the clients resume with their last token).
	srv.RegisterOnShutdown(s.gate.StopWatches)
	return srv
}

// Serve serves the API on ln (over TLS when configured) until ctx ends;
// then it is no longer ready (gRPC health says NOT_SERVING) but keeps
// serving for ShutdownDelay, so that calls routed here before the load
// balancers saw the pod go still succeed, and then drains in-flight calls
// for up to ShutdownTimeout. Meanwhile the guard reloads its token file
// and certificate when they change. It returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.HTTPServer()
	s.serveCtx.Store(&ctx)
	s.serving.Store(true)
	defer s.serving.Store(false)
	gctx, stopGuard := context.WithCancel(ctx)
	guarded := make(chan struct{})
	go func() { defer close(guarded); _ = s.guard.Run(gctx) }()
	defer func() { stopGuard(); <-guarded }()
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serving api: %w", err)
	case <-ctx.Done():
	}
	if err := s.delayShutdown(errc); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("draining api server: %w", err)
	}
	return nil
}

// delayShutdown keeps serving for ShutdownDelay (the server is already
// not ready), unless the server fails meanwhile.
func (s *Server) delayShutdown(errc <-chan error) error {
	if s.cfg.ShutdownDelay <= 0 {
		return nil
	}
	s.log.Info("stopping: serving on while the endpoints are removed", zap.Duration("shutdown_delay", s.cfg.ShutdownDelay))
	t := time.NewTimer(s.cfg.ShutdownDelay)
	defer t.Stop()
	select {
	case err := <-errc:
		return fmt.Errorf("serving api: %w", err)
	case <-t.C:
		return nil
	}
}

// Run listens on cfg.Addr and serves until ctx ends, then drains (the
// lifecycle contract). A bad address fails at once.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}
