package e2e

import (
	"net/http"
)

// h2cTransport speaks HTTP/2 without TLS, as gRPC clients do.
func h2cTransport() http.RoundTripper {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return withServerToken{&http.Transport{Protocols: &p}}
}
