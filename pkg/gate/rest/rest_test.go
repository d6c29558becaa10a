package rest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSingleMarkRoute(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/v1/users/u1/channels/c1/read":      "u1 c1 READ",
		"/v1/users/u1/channels/c1/delivered": "u1 c1 DELIVERED",
		"/v1/users/u1/channels/c1/unread":    "",
		"/v1/users/u%201/channels/c1/read":   "",
		"/v1/users//channels/c1/read":        "",
		"/v1/users/u1/channels//read":        "",
		"/v1/users/u1/chans/c1/read":         "",
		"/v1/users/u1/channels/c1/read/x":    "",
	} {
		u, c, k, ok := SingleMarkRoute(path)
		got := ""
		if ok {
			got = strings.Join([]string{u, c, k.String()}, " ")
		}
		require.Equal(t, want, got, path)
	}
}
