package server

import (
	"net/http"
	"strings"
)

// routeEscapedPath makes r's path the form the REST routers match: the
// escaped path (url.URL.EscapedPath), with every ':' past the collection
// segment escaped as "%3A". Both routers (pkg/gate/rest's and vanguard's)
// split the path on '/' and percent-decode each id segment once, so:
//
//   - given the decoded path, an id holding '/' (sent "%2F") would split
//     in two, and an id holding '%' (sent "%25") would be decoded twice;
//   - vanguard takes a ':' in the last segment for a custom verb
//     ("/v1/receipts:mark"), so an id sent with a bare ':' in that place
//     ("DELETE /v1/users/@alice:example.org") would match no route.
//
// Custom verbs follow the collection only ("/v1/receipts:mark",
// "/v1/messages:notify"), never an id, so a ':' after it is always data.
func routeEscapedPath(r *http.Request) {
	p := r.URL.EscapedPath()
	// "/v1/<collection>" ends at the third '/': the ids come after it.
	if i := nthIndex(p, '/', 3); i >= 0 && strings.IndexByte(p[i:], ':') >= 0 {
		p = p[:i] + strings.ReplaceAll(p[i:], ":", "%3A")
	}
	r.URL.Path, r.URL.RawPath = p, ""
}

// nthIndex is the index of the n-th c in s, or -1.
func nthIndex(s string, c byte, n int) int {
	at := -1
	for range n {
		i := strings.IndexByte(s[at+1:], c)
		if i < 0 {
			return -1
		}
		at += i + 1
	}
	return at
}
