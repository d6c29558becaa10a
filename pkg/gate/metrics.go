package gate

import (
	"context"
	"strings"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Event outcomes (label values of events_total).
const (
	outcomeKafka       = "kafka"
	outcomeSpooled     = "spooled"
	outcomeUnavailable = "unavailable"
)

// Redis operations (label values of redis_degraded_total).
const (
	redisOpMerge   = "merge"
	redisOpGet     = "get"
	redisOpHydrate = "hydrate"
	redisOpErase   = "erase"
)

type metrics struct {
	requests      *prometheus.CounterVec
	events        *prometheus.CounterVec
	produce       prometheus.Histogram
	redisDegraded *prometheus.CounterVec
	readFallbacks *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "requests_total",
			Help: "API calls by rpc and result code (ok or the Connect/gRPC code name).",
		}, []string{"rpc", "code"}),
		events: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "events_total",
			Help: "Validated marks by where they became durable (kafka, spooled) or unavailable.",
		}, []string{"outcome"}),
		produce: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "produce_duration_seconds",
			Help:    "Time to make a call's records durable (Kafka's acks, or the spool's fsync after the bound), or to give up.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		redisDegraded: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "redis_degraded_total",
			Help: "Redis failures that degraded the real-time view, by operation (merge counts marks).",
		}, []string{"op"}),
		readFallbacks: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "read_fallbacks_total",
			Help: "Reads answered with Postgres, by reason (incomplete: hash not hydrated; redis_error).",
		}, []string{"reason"}),
	}
}

// interceptor counts every call that reaches the handler, by rpc and code.
// Requests rejected before decoding (malformed JSON, oversize REST bodies)
// never reach it and are not counted.
func (m *metrics) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			code := "ok"
			if err != nil {
				code = connect.CodeOf(err).String()
			}
			proc := req.Spec().Procedure
			m.requests.WithLabelValues(proc[strings.LastIndexByte(proc, '/')+1:], code).Inc()
			return resp, err
		}
	}
}
