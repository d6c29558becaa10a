package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/gatetest"
)

const corsToken = "browser-test-token-0123456789"

// corsStack is a gateway with a token, allowing origins (none: CORS off).
func corsStack(t *testing.T, origins ...string) *gatetest.Stack {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte("web:"+corsToken+"\n"), 0o600))
	return gatetest.Start(t, gatetest.Options{NoWatch: true, Config: func(c *gatetest.Config) {
		c.Server.Auth.TokenFile = path
		c.Server.CORSAllowedOrigins = origins
	}})
}

func send(t *testing.T, method, url string, header map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp
}

func preflight(t *testing.T, url, origin, method, headers string) *http.Response {
	t.Helper()
	return send(t, http.MethodOptions, url, map[string]string{
		"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers,
	}, "")
}

// TestCORS: an allowed origin's preflights (a Connect POST, REST routes)
// are answered without credentials, and its calls' answers carry the
// CORS headers, refusals too; calls still need the token. Another origin
// gets no CORS header at all.
func TestCORS(t *testing.T) {
	t.Parallel()
	const allowed, other = "https://chat.example.com", "https://evil.example.net"
	st := corsStack(t, allowed, "http://localhost:3000")
	connectURL := st.URL + "/receipts.v1.ReceiptService/GetSettings"
	restURL := st.URL + "/v1/users/alice/channels/general/read"

	// The request headers are listed as browsers send them: lower-case,
	// sorted, each once (the Fetch standard's CORS-unsafe request-header
	// names). rs/cors relies on that form and refuses any other, and it
	// answers a preflight with the method and headers asked for (which
	// the standard allows) rather than the whole lists.
	for _, tc := range []struct{ url, method, headers string }{
		{connectURL, http.MethodPost, "authorization,connect-protocol-version,connect-timeout-ms,content-type"},
		{restURL, http.MethodPost, "authorization,content-type"},
		{st.URL + "/v1/channels/general/members/alice", http.MethodDelete, "authorization"},
	} {
		resp := preflight(t, tc.url, allowed, tc.method, tc.headers)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, tc.url)
		require.Equal(t, allowed, resp.Header.Get("Access-Control-Allow-Origin"))
		require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), tc.method)
		require.Equal(t, tc.headers, resp.Header.Get("Access-Control-Allow-Headers"), "every header asked for, Authorization among them")
		require.Equal(t, "7200", resp.Header.Get("Access-Control-Max-Age"))
		require.Contains(t, varyNames(resp), "Origin")
		require.Contains(t, varyNames(resp), "Access-Control-Request-Headers")

		// Another origin, or a header the API does not take: no permission.
		for _, resp := range []*http.Response{
			preflight(t, tc.url, other, tc.method, tc.headers),
			preflight(t, tc.url, allowed, tc.method, tc.headers+",x-secret"),
			preflight(t, tc.url, allowed, http.MethodPatch, ""),
		} {
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
			for k := range resp.Header {
				require.False(t, strings.HasPrefix(k, "Access-Control-"), "header %s", k)
			}
		}
	}

	call := func(origin, token string) *http.Response {
		h := map[string]string{"Origin": origin, "Content-Type": "application/json", "Connect-Protocol-Version": "1"}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		return send(t, http.MethodPost, connectURL, h, `{"userId":"alice"}`)
	}
	resp := call(allowed, corsToken)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, allowed, resp.Header.Get("Access-Control-Allow-Origin"))
	exposed := resp.Header.Get("Access-Control-Expose-Headers")
	for _, h := range []string{"Retry-After", "Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "Connect-Content-Encoding"} {
		require.Contains(t, exposed, h)
	}

	resp = call(allowed, "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the call itself still needs the token")
	require.Equal(t, allowed, resp.Header.Get("Access-Control-Allow-Origin"), "the page may read the refusal")

	resp = call(other, corsToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, "CORS is the browser's rule; the server still answers")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Empty(t, resp.Header.Get("Access-Control-Expose-Headers"))
	require.Contains(t, varyNames(resp), "Origin", "the answer to another origin differs: caches must know")

	// Origins match in any case, and the answer names the origin as sent.
	resp = call("HTTPS://Chat.Example.com", corsToken)
	require.Equal(t, "HTTPS://Chat.Example.com", resp.Header.Get("Access-Control-Allow-Origin"))
}

// varyNames are the header names of an answer's Vary headers, one or a
// comma list each.
func varyNames(resp *http.Response) []string {
	var names []string
	for _, v := range resp.Header.Values("Vary") {
		for name := range strings.SplitSeq(v, ",") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}

// TestCORSOff: without origins (the default) there is no CORS: a
// preflight meets the guard like any call without credentials.
func TestCORSOff(t *testing.T) {
	t.Parallel()
	st := corsStack(t)
	resp := preflight(t, st.URL+"/receipts.v1.ReceiptService/GetSettings", "https://chat.example.com", http.MethodPost, "content-type")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}
