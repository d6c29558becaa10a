package gate_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/api"
	"github.com/readstate/receipts/pkg/gate/server"
)

// TestOpenAPIServedWithoutCredentials: GET /openapi.json answers the
// committed document to a caller without credentials on a gateway that
// requires them (the contract is public metadata), revalidates by ETag,
// and any other method on the path is an API call the guard refuses.
func TestOpenAPIServedWithoutCredentials(t *testing.T) {
	t.Parallel()
	path := tokenFile(t)
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Server.Auth.TokenFile = path }})

	resp, err := tb.h1.Get(tb.url + server.OpenAPIPath)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, api.OpenAPIJSON(), string(body))
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)

	req, err := http.NewRequest(http.MethodGet, tb.url+server.OpenAPIPath, nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", etag)
	resp, err = tb.h1.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusNotModified, resp.StatusCode)

	resp, _ = restCall(t, tb.h1, tb.url, http.MethodPost, server.OpenAPIPath, `{}`, "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "only GET and HEAD are public")
	resp, _ = restCall(t, tb.h1, tb.url, http.MethodGet, "/v1/users/ann/settings", "", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API itself stays guarded")
}
