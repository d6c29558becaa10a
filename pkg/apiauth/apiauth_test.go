package apiauth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckListener(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080", "127.0.0.2:1"} {
		require.NoError(t, Config{}.Check(addr), "loopback %s stays open by default", addr)
	}
	for _, addr := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "10.0.0.5:8080", "gate.example:8080"} {
		err := Config{}.Check(addr)
		require.ErrorContains(t, err, "is not loopback and no authentication is configured", addr)
		require.ErrorContains(t, err, "--insecure-allow-unauthenticated")
		require.NoError(t, Config{InsecureAllowUnauthenticated: true}.Check(addr))
		require.NoError(t, Config{TokenFile: "tokens"}.Check(addr))
		require.NoError(t, Config{ClientCAFile: "ca.pem", CertFile: "c", KeyFile: "k"}.Check(addr))
	}
	require.ErrorContains(t, Config{CertFile: "c"}.Check("127.0.0.1:1"), "--tls-cert-file and --tls-key-file go together")
	require.ErrorContains(t, Config{ClientCAFile: "ca"}.Check("127.0.0.1:1"), "needs the listener's own --tls-cert-file")
	require.ErrorContains(t, Config{RateLimit: -1}.Check("127.0.0.1:1"), "RateLimit")
}

// TestReloadTokens: a rewritten token file takes effect without a
// restart (polled, or at once on SIGHUP); a broken one keeps the old
// tokens.
func TestReloadTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	oldTok, newTok := "old-token-0123456789", "new-token-0123456789"
	require.NoError(t, os.WriteFile(path, []byte("svc:"+oldTok+"\n"), 0o600))
	g, err := New(Config{TokenFile: path, ReloadInterval: 10 * time.Millisecond}, "0.0.0.0:0")
	require.NoError(t, err)
	srv := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := ClientFrom(r.Context())
		_, _ = w.Write([]byte(c.Name))
	})))
	t.Cleanup(srv.Close)
	// call answers -1 when the request fails; it runs inside Eventually's
	// goroutine, where require must not.
	call := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/x", nil)
		if err != nil {
			return -1, err.Error()
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := call(oldTok)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "token:svc", body)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	require.NoError(t, os.WriteFile(path, []byte("svc2:"+newTok+"\n"), 0o600))
	require.Eventually(t, func() bool { c, _ := call(newTok); return c == http.StatusOK }, 10*time.Second, 10*time.Millisecond)
	code, _ = call(oldTok)
	require.Equal(t, http.StatusUnauthorized, code, "the old token is gone")

	// A broken file keeps the tokens in force; SIGHUP reloads at once.
	require.NoError(t, os.WriteFile(path, []byte("short\n"), 0o600))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Never(t, func() bool { c, _ := call(newTok); return c != http.StatusOK }, 200*time.Millisecond, 10*time.Millisecond)
}
