package tracing_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/gatetest"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/tracing"
)

// receiver is an OTLP/HTTP trace receiver: it decodes each
// ExportTraceServiceRequest (protobuf, gzip or not) as a collector does
// and keeps its spans with their service names.
type receiver struct {
	mu    sync.Mutex
	spans []got
}

type got struct {
	service string
	span    *tracepb.Span
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces of application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				rc.spans = append(rc.spans, got{service, sp})
			}
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// find is the first span received that match accepts, or nil.
func (rc *receiver) find(match func(got) bool) *got {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i := range rc.spans {
		if match(rc.spans[i]) {
			g := rc.spans[i]
			return &g
		}
	}
	return nil
}

// await polls until a span match accepts arrives (deadline 20 s).
func (rc *receiver) await(t *testing.T, what string, match func(got) bool) *got {
	t.Helper()
	var g *got
	require.Eventually(t, func() bool { g = rc.find(match); return g != nil }, 20*time.Second, 20*time.Millisecond, "no span: %s", what)
	return g
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func intAttr(sp *tracepb.Span, key string) (int64, bool) {
	for _, a := range sp.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetIntValue(), true
		}
	}
	return 0, false
}

// TestPipelineTraces: a mark that arrives with a traceparent is traced
// through the in-process kafkagate (its server span a child of the
// caller's, the Redis calls children of it) to the persister, whose
// window span links to the span the record was produced in, all received
// by a real OTLP/HTTP endpoint; a refused call's error body and its log
// line carry the trace id (or the caller's X-Request-Id).
func TestPipelineTraces(t *testing.T) {
	rc := &receiver{}
	otlp := httptest.NewServer(rc)
	t.Cleanup(otlp.Close)
	// The standard variables, as a deployment sets them.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	ctx := context.Background()
	setup := func(service string) *tracing.Tracing {
		tr, err := tracing.Setup(ctx, tracing.Config{ServiceName: service, SampleRatio: 1})
		require.NoError(t, err)
		require.True(t, tr.Enabled())
		t.Cleanup(func() { require.NoError(t, tr.Shutdown(context.Background())) })
		return tr
	}
	gw, per := setup("kafkagate"), setup("persister")

	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel)).Core()))
	stack := gatetest.Start(t, gatetest.Options{NoWatch: true, Config: func(c *gatetest.Config) {
		c.Server.Tracing, c.Server.Logger, c.Gate.Logger = gw, log, log
	}})
	require.NoError(t, gw.InstrumentRedis(stack.Redis))

	p, err := persister.New(persister.Config{
		Kafka: kafkaconf.Config{Brokers: stack.Broker.Seeds}, KafkaOpts: kafkatest.FastClientOpts(stack.Broker.Seeds),
		Topic: stack.Broker.Topic, DLTTopic: stack.Broker.DLTTopic, Group: stack.Broker.Group,
		Postgres: pgstore.Config{URL: pgtest.URL(), Schema: stack.Schema.Name, MaxConns: 4},
		Retry:    backoff.Config{Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond},
		Tracing:  per, Logger: log.Named("persister"), DrainTimeout: 5 * time.Second,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done); p.Close() })

	post := func(path, body string, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, stack.URL+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}

	// A mark on the REST fast path, in the caller's trace.
	traceID, parentID := randomHex(t, 16), randomHex(t, 8)
	resp, body := post("/v1/users/ann/channels/c1/read", `{"seq":3}`, map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	server := rc.await(t, "kafkagate's span of the mark", func(g got) bool {
		return g.service == "kafkagate" && hex.EncodeToString(g.span.GetTraceId()) == traceID && g.span.GetKind() == tracepb.Span_SPAN_KIND_SERVER
	})
	require.Equal(t, parentID, hex.EncodeToString(server.span.GetParentSpanId()), "the server span is a child of the caller's")
	require.Equal(t, "receipts.v1.ReceiptService/MarkRead", server.span.GetName())
	for _, k := range []string{"receipts.users", "receipts.channels"} {
		n, ok := intAttr(server.span, k)
		require.True(t, ok, k)
		require.Equal(t, int64(1), n, k)
	}
	serverID := server.span.GetSpanId()
	rc.await(t, "a Redis call under the mark's span", func(g got) bool {
		return g.service == "kafkagate" && bytes.Equal(g.span.GetParentSpanId(), serverID) && g.span.GetKind() == tracepb.Span_SPAN_KIND_CLIENT
	})

	// The persister's window links to the span the record was produced in.
	window := rc.await(t, "the persister's window linked to the mark", func(g got) bool {
		if g.service != "persister" || g.span.GetName() != "persister.window" {
			return false
		}
		for _, l := range g.span.GetLinks() {
			if hex.EncodeToString(l.GetTraceId()) == traceID && bytes.Equal(l.GetSpanId(), serverID) {
				return true
			}
		}
		return false
	})
	dropped, ok := intAttr(window.span, "receipts.links_dropped")
	require.True(t, ok)
	require.Zero(t, dropped)
	rc.await(t, "a Postgres statement under the window's span", func(g got) bool {
		return g.service == "persister" && bytes.Equal(g.span.GetTraceId(), window.span.GetTraceId()) &&
			bytes.Equal(g.span.GetParentSpanId(), window.span.GetSpanId())
	})

	// A refused REST call: its body names the request by its trace id, and
	// its log line carries it.
	refusedTrace := randomHex(t, 16)
	resp, body = post("/v1/users/ann/channels/c1/read", `{"seq":-1}`, map[string]string{"traceparent": "00-" + refusedTrace + "-" + randomHex(t, 8) + "-01"})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	info := apierr.RequestInfoOfREST(body)
	require.NotNil(t, info, "%s", body)
	require.Equal(t, refusedTrace, info.GetRequestId())
	require.NotNil(t, apierr.InfoOfREST(body), "the ErrorInfo stays: %s", body)
	require.NotEmpty(t, logs.FilterMessage("call refused").FilterField(zap.String(tracing.LogKey, refusedTrace)).All(), "a log line of the refused call with its trace id")

	// With an X-Request-Id, that is the request id, echoed back; the log
	// line still carries the trace id.
	otherTrace := randomHex(t, 16)
	resp, body = post("/v1/users/ann/channels/c1/read", `{"seq":-1}`, map[string]string{
		"traceparent": "00-" + otherTrace + "-" + randomHex(t, 8) + "-01", "X-Request-Id": "req-42",
	})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "req-42", resp.Header.Get("X-Request-Id"))
	require.Equal(t, "req-42", apierr.RequestInfoOfREST(body).GetRequestId())
	require.NotEmpty(t, logs.FilterMessage("call refused").FilterField(zap.String(tracing.LogKey, otherTrace)).
		FilterField(zap.String("request_id", "req-42")).All())

	// A refused Connect call: otelconnect's server span in the caller's
	// trace, and the RequestInfo in the error's details.
	rpcTrace := randomHex(t, 16)
	cl := receiptsv1connect.NewReceiptServiceClient(http.DefaultClient, stack.URL)
	creq := connect.NewRequest(&receiptsv1.MarkRequest{UserId: "ann", ChannelId: "c1", Seq: -1})
	creq.Header().Set("traceparent", "00-"+rpcTrace+"-"+randomHex(t, 8)+"-01")
	_, err = cl.MarkRead(ctx, creq)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.Equal(t, rpcTrace, apierr.RequestInfoOf(err).GetRequestId())
	rc.await(t, "otelconnect's span of the refused RPC", func(g got) bool {
		return g.service == "kafkagate" && hex.EncodeToString(g.span.GetTraceId()) == rpcTrace &&
			g.span.GetKind() == tracepb.Span_SPAN_KIND_SERVER && g.span.GetName() == "receipts.v1.ReceiptService/MarkRead"
	})
}
