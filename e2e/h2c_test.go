package e2e

import (
	"net/http"
)

// h2cTransport speaks HTTP/2 without TLS, as gRPC clients do.
func h2cTransport() *http.Transport {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: &p}
}
