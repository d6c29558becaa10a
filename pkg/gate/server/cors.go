package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rs/cors"
)

// The CORS lists: connect-go's (connectrpc.com/cors: what the Connect,
// gRPC-Web and gRPC protocols send and must expose) plus this API's own.
var (
	// corsMethods: Connect needs GET and POST; the REST routes add PUT and
	// DELETE.
	corsMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
	// corsHeaders: Authorization carries the bearer token; the rest are
	// connect's.
	corsHeaders = []string{
		"Authorization", "Content-Type", "Connect-Protocol-Version", "Connect-Timeout-Ms",
		"Connect-Accept-Encoding", "Connect-Content-Encoding", "Accept-Encoding", "Content-Encoding",
		"Grpc-Timeout", "X-Grpc-Web", "X-User-Agent",
	}
	// corsExposed: connect's, and Retry-After (rate limits, HEAD_BEHIND,
	// UNAVAILABLE) and WWW-Authenticate (a 401's challenge).
	corsExposed = []string{
		"Content-Encoding", "Connect-Content-Encoding", "Grpc-Status", "Grpc-Message",
		"Grpc-Status-Details-Bin", "Retry-After", "WWW-Authenticate",
	}
)

// corsMaxAge is how long a browser may reuse a preflight's answer, in
// seconds (Chromium caps it at 2 hours).
const corsMaxAge = 7200

// newCORS checks origins (each scheme://host[:port], as browsers send the
// Origin header) and builds the policy, github.com/rs/cors configured
// strictly: an origin is allowed only when listed exactly (scheme, host,
// port; any case), a preflight only for the methods and headers above
// (answered 204 before the guard: browsers send no credentials with
// one), and a request from any other origin gets no CORS header at all
// (the browser then hides the answer from the page). Every answer carries
// Vary: Origin, so caches keep the answers to different origins apart.
func newCORS(origins []string) (*cors.Cors, error) {
	allowed := make([]string, 0, len(origins))
	for _, o := range origins {
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, err
		}
		allowed = append(allowed, norm)
	}
	return cors.New(cors.Options{
		AllowedOrigins: allowed,
		AllowedMethods: corsMethods,
		AllowedHeaders: corsHeaders,
		ExposedHeaders: corsExposed,
		MaxAge:         corsMaxAge,
	}), nil
}

// normalizeOrigin lower-cases an origin after checking that it is one:
// no wildcard (rs/cors would take one as a pattern), path, query or
// credentials.
func normalizeOrigin(o string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("CORSAllowedOrigins: %q: %s (want scheme://host[:port], e.g. https://chat.example.com)", o, why)
	}
	if strings.Contains(o, "*") {
		return bad("wildcards are not accepted: list each origin")
	}
	u, err := url.Parse(o)
	if err != nil {
		return bad(err.Error())
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("scheme must be http or https")
	case u.Host == "":
		return bad("no host")
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return bad("an origin has no path, query or credentials")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}
