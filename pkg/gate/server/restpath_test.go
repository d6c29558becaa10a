package server

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRouteEscapedPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/v1/receipts:mark":                       "/v1/receipts:mark",
		"/v1/messages:notify":                     "/v1/messages:notify",
		"/v1/users/@alice:example.org":            "/v1/users/@alice%3Aexample.org",
		"/v1/users/%40alice%3Aexample.org/unread": "/v1/users/%40alice%3Aexample.org/unread",
		"/v1/users/a%2Fb/channels/!r:x/read":      "/v1/users/a%2Fb/channels/!r%3Ax/read",
		"/v1/channels/c/members/u:1":              "/v1/channels/c/members/u%3A1",
		"/v1/users/50%25/read-state":              "/v1/users/50%25/read-state",
		"/v1/users/u1/channels/c1/read":           "/v1/users/u1/channels/c1/read",
		"/v1/users":                               "/v1/users",
	} {
		r := httptest.NewRequest("GET", "http://h"+in, nil)
		routeEscapedPath(r)
		require.Equal(t, want, r.URL.Path, in)
		require.Empty(t, r.URL.RawPath)
	}
}
