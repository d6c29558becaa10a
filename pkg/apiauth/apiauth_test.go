package apiauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/tlstest"
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

	// Replaced as a Secret's mount replaces it (a rename): a file truncated
	// then written could be read empty in between, and an empty file now
	// denies everyone.
	replace := func(content string) {
		tmp := path + ".tmp"
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
		require.NoError(t, os.Rename(tmp, path))
	}
	replace("svc2:" + newTok + "\n")
	require.Eventually(t, func() bool { c, _ := call(newTok); return c == http.StatusOK }, 10*time.Second, 10*time.Millisecond)
	code, body = call(oldTok)
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid, "the old token is gone")

	// A broken file keeps the tokens in force; SIGHUP reloads at once.
	replace("short\n")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	require.Never(t, func() bool { c, _ := call(newTok); return c != http.StatusOK }, 200*time.Millisecond, 10*time.Millisecond)
}

// serveAs runs one request through g's guard to a handler that checks
// scope need and answers the client's name and scopes, or 403 with the
// ForbiddenError; it returns the status and body.
func serveAs(t *testing.T, g *Guard, need Scope, prepare func(r *http.Request)) (int, string) {
	t.Helper()
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := Require(r.Context(), "Call", need); err != nil {
			require.True(t, IsForbidden(err))
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		c, _ := ClientFrom(r.Context())
		_, _ = w.Write([]byte(c.Name + " " + c.Scopes.String()))
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/v1/x", nil)
	if prepare != nil {
		prepare(req)
	}
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// TestScopes: a token's scopes decide its calls; a call outside them is a
// ForbiddenError naming the call and the missing scope, counted by scope;
// a caller of an open API holds every scope.
func TestScopes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	const (
		legacy = "legacy-token-0123456789"
		reader = "reader-token-0123456789"
		eraser = "eraser-token-0123456789"
	)
	require.NoError(t, os.WriteFile(path, []byte("chat:"+legacy+"\nviewer:"+reader+":read\ngdpr:"+eraser+":erase\n"), 0o600))
	reg := prometheus.NewRegistry()
	g, err := New(Config{TokenFile: path, Registerer: reg, Namespace: "receipts", Subsystem: "t"}, "0.0.0.0:0")
	require.NoError(t, err)

	code, body := serveAs(t, g, ScopeWrite, bearer(legacy))
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "token:chat mark,notify,read,watch", body)
	code, body = serveAs(t, g, ScopeErase, bearer(legacy))
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, `permission denied: Call needs the "erase" scope, which client token:chat lacks (it holds mark,notify,read,watch)`)
	for _, need := range []Scope{ScopeMark, ScopeNotify, ScopeWatch, ScopeErase} {
		code, body = serveAs(t, g, need, bearer(reader))
		require.Equal(t, http.StatusForbidden, code, "%s", need)
		require.Contains(t, body, fmt.Sprintf("needs the %q scope", need.String()))
	}
	code, _ = serveAs(t, g, ScopeRead, bearer(reader))
	require.Equal(t, http.StatusOK, code)
	code, _ = serveAs(t, g, ScopeErase, bearer(eraser))
	require.Equal(t, http.StatusOK, code)
	code, _ = serveAs(t, g, ScopeRead, bearer(eraser))
	require.Equal(t, http.StatusForbidden, code, "a scope list grants only its scopes")

	code, body = serveAs(t, g, ScopeRead, nil)
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsMissing, "no token: 401 before any scope")
	code, body = serveAs(t, g, ScopeRead, bearer("unknown-token-0123456789"))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid)

	for scope, want := range map[string]float64{"erase": 2, "mark": 1, "notify": 1, "watch": 1, "read": 1} {
		require.Equal(t, want, testutil.ToFloat64(g.m.forbidden.WithLabelValues(scope)), scope)
	}

	open, err := New(Config{InsecureAllowUnauthenticated: true}, "0.0.0.0:0")
	require.NoError(t, err)
	code, body = serveAs(t, open, ScopeErase, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ip:192.0.2.1 mark,notify,read,watch,erase", body, "an open API grants every scope")
}

// TestEmptyTokenFileDeniesAll: a token file without tokens starts (a
// lock-down, with a warning) and refuses every token with 401.
func TestEmptyTokenFileDeniesAll(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte("# nobody\n"), 0o600))
	g, err := New(Config{TokenFile: path}, "0.0.0.0:0")
	require.NoError(t, err)
	for _, c := range []struct {
		prepare func(*http.Request)
		reason  apierr.Reason
	}{{nil, apierr.CredentialsMissing}, {bearer("any-token-0123456789abc"), apierr.CredentialsInvalid}, {bearer("# nobody"), apierr.CredentialsInvalid}} {
		code, body := serveAs(t, g, ScopeRead, c.prepare)
		apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, c.reason)
	}
}

// TestFailedReloadKeepsTheOldSet: a token file or client scopes file that
// fails to reload keeps the previous version in force, counts in
// auth_reload_failures_total, sets auth_last_reload_successful to 0 and
// shows in Status (without the file's secrets); the next good reload
// clears it. An emptied file is a good reload: it refuses everyone.
func TestFailedReloadKeepsTheOldSet(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	dir := t.TempDir()
	tokens, scopes := filepath.Join(dir, "tokens"), filepath.Join(dir, "client-scopes")
	const tok, secret = "svc-token-0123456789", "Zq9-new-secret-token"
	require.NoError(t, os.WriteFile(tokens, []byte("svc:"+tok+"\n"), 0o600))
	require.NoError(t, os.WriteFile(scopes, []byte("receipts:read\n"), 0o600))
	g, err := New(Config{TokenFile: tokens, ClientScopesFile: scopes, CertFile: pki.ServerCertFile, KeyFile: pki.ServerKeyFile, ClientCAFile: pki.CAFile}, "0.0.0.0:0")
	require.NoError(t, err)
	asCert := func(r *http.Request) {
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{pki.ClientCert.Leaf}}}
	}
	require.Empty(t, g.Status())
	require.Equal(t, 1.0, testutil.ToFloat64(g.m.reloadOK))

	require.NoError(t, os.WriteFile(tokens, []byte("svc:"+secret+":wirte\n"), 0o600))
	require.NoError(t, os.WriteFile(scopes, []byte("receipts:raed\n"), 0o600))
	g.Reload()
	code, body := serveAs(t, g, ScopeWrite, bearer(tok))
	require.Equal(t, http.StatusOK, code, "the old token still serves: %s", body)
	code, body = serveAs(t, g, ScopeRead, bearer(secret))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid)
	code, body = serveAs(t, g, ScopeRead, asCert)
	require.Equal(t, http.StatusOK, code, "the old client scopes still hold: %s", body)
	require.Equal(t, "cert:receipts read", body)
	require.Equal(t, 1.0, testutil.ToFloat64(g.m.reloadFailures.WithLabelValues(fileTokens)))
	require.Equal(t, 1.0, testutil.ToFloat64(g.m.reloadFailures.WithLabelValues(fileClientScopes)))
	require.Equal(t, 0.0, testutil.ToFloat64(g.m.reloadOK))
	st := g.Status()
	require.Contains(t, st, "auth files failed to reload at ")
	require.Contains(t, st, "the previous versions are in force")
	require.Contains(t, st, "token file "+tokens+": line 1: scope 1 of the list")
	require.Contains(t, st, "client scopes file "+scopes+": line 1")
	require.NotContains(t, st, secret)
	require.NotContains(t, st, "\n")

	require.NoError(t, os.WriteFile(tokens, nil, 0o600))
	require.NoError(t, os.WriteFile(scopes, []byte("someone-else\n"), 0o600))
	g.Reload()
	require.Empty(t, g.Status())
	require.Equal(t, 1.0, testutil.ToFloat64(g.m.reloadOK))
	code, _ = serveAs(t, g, ScopeRead, bearer(tok))
	require.Equal(t, http.StatusUnauthorized, code, "an emptied token file refuses everyone")
	code, body = serveAs(t, g, ScopeRead, asCert)
	require.Equal(t, http.StatusForbidden, code, "an unlisted subject holds no scope")
	require.Contains(t, body, "client cert:receipts lacks (it holds none)")
}

// TestCertificatesWithoutScopesFile: without a client scopes file every
// certificate the CA signs holds the default scopes (not erase).
func TestCertificatesWithoutScopesFile(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	g, err := New(Config{CertFile: pki.ServerCertFile, KeyFile: pki.ServerKeyFile, ClientCAFile: pki.CAFile}, "0.0.0.0:0")
	require.NoError(t, err)
	code, body := serveAs(t, g, ScopeWatch, func(r *http.Request) {
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{pki.ClientCert.Leaf}}}
	})
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "cert:receipts mark,notify,read,watch", body)
	require.ErrorContains(t, Config{ClientScopesFile: "s"}.Check("127.0.0.1:1"), "--tls-client-scopes-file needs --tls-client-ca-file")
}
