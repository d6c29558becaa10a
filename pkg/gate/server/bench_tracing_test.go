package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/readstate/receipts/pkg/gatetest"
	"github.com/readstate/receipts/pkg/tracing"
)

// markVariants: tracing off (no endpoint), and on with the sampler at 1 %
// and at 100 % of the traces, exporting over OTLP/HTTP to a receiver in
// the process (which only reads the requests: a collector's decoding is
// not the gateway's cost).
var markVariants = []markVariant{
	{name: "off", configure: func(*testing.B, *gatetest.Config) {}, started: func(*testing.B, *gatetest.Stack) {}},
	tracedVariant("on-1pct", 0.01),
	tracedVariant("on-100pct", 1),
}

func tracedVariant(name string, ratio float64) markVariant {
	var tr *tracing.Tracing
	return markVariant{
		name: name,
		configure: func(b *testing.B, c *gatetest.Config) {
			if tr == nil {
				otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/x-protobuf")
				}))
				b.Cleanup(otlp.Close)
				b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.URL)
				var err error
				if tr, err = tracing.Setup(context.Background(), tracing.Config{ServiceName: "kafkagate", SampleRatio: ratio}); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = tr.Shutdown(context.Background()); tr = nil })
			}
			c.Server.Tracing = tr
		},
		started: func(b *testing.B, s *gatetest.Stack) {
			if err := tr.InstrumentRedis(s.Redis); err != nil {
				b.Fatal(err)
			}
		},
	}
}
