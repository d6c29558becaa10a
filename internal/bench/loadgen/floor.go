package loadgen

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// FloorMaxBodyBytes bounds a request body of the floor server, as the
// gateway bounds its own.
const FloorMaxBodyBytes = 1 << 20

// FloorServer is the HTTP floor of the write routes: the same net/http
// server settings the gateway uses (HTTP/1.1 and h2c, the same timeouts),
// with a handler that only reads the body and writes a fixed answer in the
// route's shape. Driving it with the load tool as the gateway is driven
// measures what serving HTTP alone costs on the machine (the load tool's
// share included), the bound of any gateway on the same stack.
func FloorServer(addr string) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           FloorHandler(),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// FloorHandler answers every POST with a fixed success in the shape of the
// mark routes (one result for a single-mark route, and as many results as
// the body has receipts for the batch route, counted without decoding:
// one per "user_id"), after reading the whole body.
func FloorHandler() http.Handler {
	const single = `{"result":{"advanced":true,"durability":"DURABILITY_KAFKA"}}`
	const result = `{"advanced":true,"durability":"DURABILITY_KAFKA"}`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "the floor server answers POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, FloorMaxBodyBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !strings.HasSuffix(r.URL.Path, ":mark") {
			_, _ = io.WriteString(w, single)
			return
		}
		n := strings.Count(string(body), `"user_id"`)
		var b strings.Builder
		b.Grow(len(`{"results":[]}`) + n*(len(result)+1))
		b.WriteString(`{"results":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(result)
		}
		b.WriteString(`]}`)
		_, _ = io.WriteString(w, b.String())
	})
}
