package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// Every stack's gateway authenticates its callers as production does: a
// server token (every scope) that the tests' clients send on each call
// naming no token of their own, and end-user tokens (JWTs, HS256) that
// the linearizability workload's clients send, each for its own user.
const serverToken = "e2e-server-token-0123456789abcdef"

var endUserKey = []byte("e2e-end-user-key-0123456789abcdef0123456789")

// authArgs writes the stack's auth files into dir and returns kafkagate's
// flags for them (end-user rate limits off: the workloads are fast).
func authArgs(t testing.TB, dir string) []string {
	t.Helper()
	tokens, key := filepath.Join(dir, "tokens"), filepath.Join(dir, "jwt.key")
	require.NoError(t, os.WriteFile(tokens, []byte("e2e:"+serverToken+":mark,notify,read,watch,erase\n"), 0o600))
	require.NoError(t, os.WriteFile(key, endUserKey, 0o600))
	return []string{"--auth-token-file", tokens, "--auth-jwt-hs256-key-file", key, "--rate-limit-user", "-1"}
}

// withServerToken adds the server token to a request that carries none.
type withServerToken struct{ base http.RoundTripper }

func (w withServerToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+serverToken)
	}
	return w.base.RoundTrip(r)
}

func init() { http.DefaultTransport = withServerToken{http.DefaultTransport} }

var (
	endUserMu     sync.Mutex
	endUserTokens = map[string]string{}
)

// endUserToken is a JWT of user, valid for a day.
func endUserToken(user string) string {
	endUserMu.Lock()
	defer endUserMu.Unlock()
	if tok, ok := endUserTokens[user]; ok {
		return tok
	}
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject: user, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(24 * time.Hour)),
	}).SignedString(endUserKey)
	if err != nil {
		panic(err)
	}
	endUserTokens[user] = tok
	return tok
}
