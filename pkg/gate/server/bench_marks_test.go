package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/readstate/receipts/pkg/gatetest"
)

// markVariant is one way of running the gateway under BenchmarkMarks:
// configure changes its config before it starts, started runs once it
// serves.
type markVariant struct {
	name      string
	configure func(b *testing.B, c *gatetest.Config)
	started   func(b *testing.B, s *gatetest.Stack)
}

// BenchmarkMarks measures single marks on the REST fast path (POST
// /v1/users/{u}/channels/{c}/read) through an in-process gateway on the
// real Redis and a kfake broker, 16 callers at a time, from a client that
// does not trace (no traceparent: the gateway's sampler decides): what
// tracing costs a mark, per variant (markVariants).
func BenchmarkMarks(b *testing.B) {
	for _, v := range markVariants {
		b.Run(v.name, func(b *testing.B) {
			stack := gatetest.Start(b, gatetest.Options{NoWatch: true, Config: func(c *gatetest.Config) { v.configure(b, c) }})
			v.started(b, stack)
			cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var seq atomic.Int64
			b.SetParallelism(8)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					url := fmt.Sprintf("%s/v1/users/u%d/channels/c/read", stack.URL, n%1000)
					req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewBufferString(fmt.Sprintf(`{"seq":%d}`, n)))
					req.Header.Set("Content-Type", "application/json")
					resp, err := cl.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "marks/s")
		})
	}
}
