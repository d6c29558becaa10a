package server

import (
	"context"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// requestBuckets are the request_duration_seconds buckets; 0.25 is the
// latency SLO's threshold (helm/receipts/files/prometheus-rules.yaml).
var requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// metrics counts the calls that reach the handlers.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// watchDropped counts watch streams ended by a failed write.
	watchDropped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "requests_total",
			Help: "API calls by rpc and result code (ok or the Connect/gRPC code name).",
		}, []string{"rpc", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "request_duration_seconds",
			Help:    "Time to answer an API call that reached the handler, by rpc (every result code).",
			Buckets: requestBuckets,
		}, []string{"rpc"}),
		watchDropped: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "watch_write_failures_total",
			Help: "Watch streams ended by a write that failed: the client went away, or did not read within the watch write timeout.",
		}),
	}
}

// interceptor counts every call that reaches the handler, by rpc and code.
// Requests rejected before decoding (malformed JSON, oversize REST bodies)
// never reach it and are not counted.
func (m *metrics) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			start := time.Now()
			resp, err := next(ctx, req)
			proc := req.Spec().Procedure
			m.observe(proc[strings.LastIndexByte(proc, '/')+1:], start, err)
			return resp, err
		}
	}
}

// observe counts one answered call of rpc begun at start: requests_total
// by code and request_duration_seconds. A path that answers without the
// connect handler (the REST fast path) calls it itself.
func (m *metrics) observe(rpc string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	m.requests.WithLabelValues(rpc, code).Inc()
	m.duration.WithLabelValues(rpc).Observe(time.Since(start).Seconds())
}
