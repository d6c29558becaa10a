package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
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
const corsMaxAge = "7200"

// cors lets browser pages of the listed origins call the API (Connect,
// gRPC-Web, REST). It is strict: an origin is allowed only when listed
// exactly (scheme, host, port), a preflight only for the methods and
// headers above, and a request from any other origin gets no CORS header
// at all (the browser then hides the answer from the page).
type cors struct {
	origins                            map[string]bool
	methods, headers, exposed, allowed string
}

// newCORS checks origins (each scheme://host[:port], as browsers send the
// Origin header) and builds the policy.
func newCORS(origins []string) (*cors, error) {
	c := &cors{
		origins: make(map[string]bool, len(origins)),
		methods: strings.Join(corsMethods, ", "),
		headers: strings.Join(corsHeaders, ", "),
		exposed: strings.Join(corsExposed, ", "),
	}
	for _, o := range origins {
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, err
		}
		c.origins[norm] = true
	}
	return c, nil
}

// normalizeOrigin lower-cases an origin after checking that it is one:
// no wildcard, path, query or credentials.
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

// wrap answers preflights itself (before the guard: browsers send no
// credentials with them) and marks the answers to allowed origins.
func (c *cors) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Answers differ by origin, so caches must keep them apart, even
		// the answer to a request without one.
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		allowed := c.origins[strings.ToLower(origin)]
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if allowed && slices.Contains(corsMethods, r.Header.Get("Access-Control-Request-Method")) &&
				headersAllowed(r.Header.Values("Access-Control-Request-Headers")) {
				h.Set("Access-Control-Allow-Origin", origin)
				h.Set("Access-Control-Allow-Methods", c.methods)
				h.Set("Access-Control-Allow-Headers", c.headers)
				h.Set("Access-Control-Max-Age", corsMaxAge)
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", c.exposed)
		}
		next.ServeHTTP(w, r)
	})
}

// headersAllowed reports whether every header a preflight names (comma
// lists, any case) is in corsHeaders.
func headersAllowed(lists []string) bool {
	for _, l := range lists {
		for name := range strings.SplitSeq(l, ",") {
			name = strings.TrimSpace(name)
			if name != "" && !slices.ContainsFunc(corsHeaders, func(h string) bool { return strings.EqualFold(h, name) }) {
				return false
			}
		}
	}
	return true
}
