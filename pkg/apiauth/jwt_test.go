package apiauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/jwttest"
)

// endUserGuard is a guard accepting the issuer's tokens: HS256 with its
// key file, RS256 and ES256 with its JWKS file.
func endUserGuard(t *testing.T, iss *jwttest.Issuer, edit func(*Config)) *Guard {
	t.Helper()
	cfg := Config{JWTHS256KeyFile: iss.HS256KeyFile, JWKSFile: iss.JWKSFile, JWTAudience: jwttest.Audience}
	if edit != nil {
		edit(&cfg)
	}
	g, err := New(cfg, "0.0.0.0:0")
	require.NoError(t, err)
	return g
}

func withClaims(c jwt.MapClaims, edit func(jwt.MapClaims)) jwt.MapClaims {
	edit(c)
	return c
}

// TestEndUserTokens: an HS256, RS256 or ES256 token of the issuer names
// its user (sub) with the end-user scopes; expired, early, foreign,
// unsigned, wrongly signed or keyless tokens are 401 with a reason that
// says which.
func TestEndUserTokens(t *testing.T) {
	t.Parallel()
	iss, stranger := jwttest.New(t), jwttest.New(t)
	g := endUserGuard(t, iss, nil)

	for alg, tok := range map[string]string{
		"HS256": iss.HS256(t, jwttest.Claims("alice")),
		"RS256": iss.RS256(t, jwttest.Claims("alice")),
		"ES256": iss.ES256(t, jwttest.Claims("alice")),
	} {
		code, body := serveAs(t, g, ScopeMark, bearer(tok))
		require.Equal(t, http.StatusOK, code, "%s: %s", alg, body)
		require.Equal(t, "user:alice mark,read,watch", body, alg)
		for _, need := range []Scope{ScopeNotify, ScopeErase} {
			code, body = serveAs(t, g, need, bearer(tok))
			require.Equal(t, http.StatusForbidden, code, alg)
			require.Contains(t, body, "which client user:alice lacks (it holds mark,read,watch)")
		}
	}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := ClientFrom(r.Context())
		_, _ = w.Write([]byte(c.User))
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
	bearer(iss.ES256(t, jwttest.Claims("bob@example.com")))(req)
	h.ServeHTTP(rec, req)
	require.Equal(t, "bob@example.com", rec.Body.String(), "Client.User is the sub")

	now := time.Now()
	hsNone := jwt.NewWithClaims(jwt.SigningMethodNone, jwttest.Claims("alice"))
	none, err := hsNone.SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	// The RSA public key as an HS256 secret: the algorithm confusion of
	// libraries that take the key from the token's alg.
	pubDER, _ := json.Marshal(iss.RSA.PublicKey)
	confused, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwttest.Claims("alice")).SignedString(pubDER)
	require.NoError(t, err)
	unknown := signRS256(t, iss, "rotated-away", jwttest.Claims("alice"))

	for name, c := range map[string]struct {
		token  string
		reason apierr.Reason
		msg    string
	}{
		"expired":              {iss.HS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })), apierr.CredentialsExpired, "end-user token expired"},
		"expired ES256":        {iss.ES256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() })), apierr.CredentialsExpired, "end-user token expired"},
		"no exp":               {iss.HS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { delete(c, "exp") })), apierr.CredentialsInvalid, "no exp claim"},
		"not yet (nbf)":        {iss.HS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() })), apierr.CredentialsInvalid, "not valid yet"},
		"issued in the future": {iss.RS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { c["iat"] = now.Add(time.Hour).Unix() })), apierr.CredentialsInvalid, "not valid yet"},
		"another audience":     {iss.HS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { c["aud"] = "billing" })), apierr.CredentialsInvalid, "aud does not name this API"},
		"no audience":          {iss.RS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { delete(c, "aud") })), apierr.CredentialsInvalid, "aud does not name this API"},
		"no sub":               {iss.HS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { delete(c, "sub") })), apierr.CredentialsInvalid, "sub claim is not a user id"},
		"sub not an id":        {iss.HS256(t, jwttest.Claims("{alice}")), apierr.CredentialsInvalid, "sub claim is not a user id"},
		"HS256 of another key": {stranger.HS256(t, jwttest.Claims("alice")), apierr.CredentialsInvalid, "signature does not verify"},
		"RS256 of another key": {stranger.RS256(t, jwttest.Claims("alice")), apierr.CredentialsInvalid, "signature does not verify"},
		"ES256 of another key": {stranger.ES256(t, jwttest.Claims("alice")), apierr.CredentialsInvalid, "signature does not verify"},
		"unknown kid":          {unknown, apierr.CredentialsInvalid, "kid names no key"},
		"alg none":             {none, apierr.CredentialsInvalid, "signature does not verify"},
		"alg confusion":        {confused, apierr.CredentialsInvalid, "signature does not verify"},
		"tampered payload":     {tamper(iss.HS256(t, jwttest.Claims("alice")), "bob"), apierr.CredentialsInvalid, "signature does not verify"},
		"malformed":            {"eyJhbGciOi.x.y", apierr.CredentialsInvalid, "malformed"},
		"too long":             {"eyJ" + strings.Repeat("a", MaxJWTLength) + ".a.b", apierr.CredentialsInvalid, "longer than"},
	} {
		code, body := serveAs(t, g, ScopeRead, bearer(c.token))
		apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, c.reason, name)
		require.Contains(t, body, c.msg, name)
		require.NotContains(t, body, c.token[:min(len(c.token), 40)], "%s: the answer never repeats the token", name)
	}
	require.Equal(t, 2.0, testutil.ToFloat64(g.m.rejected.WithLabelValues(reasonExpired)))

	// Within the leeway an expired token still serves; an HS256-only
	// gateway refuses RS256 tokens.
	code, body := serveAs(t, g, ScopeRead, bearer(iss.HS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { c["exp"] = now.Add(-10 * time.Second).Unix() }))))
	require.Equal(t, http.StatusOK, code, body)
	hsOnly := endUserGuard(t, iss, func(c *Config) { c.JWKSFile, c.JWTAudience = "", "" })
	code, body = serveAs(t, hsOnly, ScopeRead, bearer(iss.RS256(t, jwttest.Claims("alice"))))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid)
	require.Contains(t, body, "algorithm or key the API does not accept")
	code, _ = serveAs(t, hsOnly, ScopeRead, bearer(iss.HS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { c["aud"] = "anyone" }))))
	require.Equal(t, http.StatusOK, code, "without --auth-jwt-audience the aud is not checked")
	jwksOnly := endUserGuard(t, iss, func(c *Config) { c.JWTHS256KeyFile = "" })
	code, body = serveAs(t, jwksOnly, ScopeRead, bearer(confused))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid, "an HS256 token is never checked with a JWKS key")
	require.Contains(t, body, "algorithm or key the API does not accept")

	withIssuer := endUserGuard(t, iss, func(c *Config) { c.JWTIssuer = "https://id.example" })
	code, body = serveAs(t, withIssuer, ScopeRead, bearer(iss.HS256(t, jwttest.Claims("alice"))))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid)
	require.Contains(t, body, "iss is not the accepted issuer")
	code, _ = serveAs(t, withIssuer, ScopeRead, bearer(iss.HS256(t, withClaims(jwttest.Claims("alice"), func(c jwt.MapClaims) { c["iss"] = "https://id.example" }))))
	require.Equal(t, http.StatusOK, code)
}

// tamper replaces the payload's sub, keeping the signature.
func tamper(token, sub string) string {
	parts := strings.Split(token, ".")
	payload, _ := json.Marshal(map[string]any{"sub": sub, "aud": jwttest.Audience, "exp": time.Now().Add(time.Hour).Unix()})
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

// TestEndUserTokensBesideServerTokens: a token file and end-user tokens
// together; a server token keeps its scopes and has no user.
func TestEndUserTokensBesideServerTokens(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	path := t.TempDir() + "/tokens"
	require.NoError(t, os.WriteFile(path, []byte("relay:relay-token-0123456789:mark,read\n"), 0o600))
	g := endUserGuard(t, iss, func(c *Config) { c.TokenFile = path })
	code, body := serveAs(t, g, ScopeRead, bearer("relay-token-0123456789"))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "token:relay mark,read", body)
	code, _ = serveAs(t, g, ScopeNotify, bearer("relay-token-0123456789"))
	require.Equal(t, http.StatusForbidden, code, "the tier that relays reads cannot notify")
	code, body = serveAs(t, g, ScopeRead, bearer(iss.HS256(t, jwttest.Claims("alice"))))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "user:alice mark,read,watch", body)
	code, body = serveAs(t, g, ScopeRead, bearer("not-a-token-0123456789"))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid)
	code, body = serveAs(t, g, ScopeRead, nil)
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsMissing)
}

// TestEndUserRateLimit: end-user tokens are limited per user by default,
// whether or not server clients are; each user has a budget of its own.
func TestEndUserRateLimit(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	g := endUserGuard(t, iss, func(c *Config) { c.UserRateLimit, c.UserRateLimitBurst = 0.01, 3 })
	alice, bob := iss.HS256(t, jwttest.Claims("alice")), iss.ES256(t, jwttest.Claims("bob"))
	for range 3 {
		code, body := serveAs(t, g, ScopeRead, bearer(alice))
		require.Equal(t, http.StatusOK, code, body)
	}
	code, body := serveAs(t, g, ScopeRead, bearer(alice))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusTooManyRequests, apierr.RateLimited)
	require.Contains(t, body, "for client user:alice exceeded")
	// Another token of alice's spends the same budget.
	code, _ = serveAs(t, g, ScopeRead, bearer(iss.RS256(t, jwttest.Claims("alice"))))
	require.Equal(t, http.StatusTooManyRequests, code)
	code, _ = serveAs(t, g, ScopeRead, bearer(bob))
	require.Equal(t, http.StatusOK, code, "bob's budget is his own")

	d := endUserGuard(t, iss, nil)
	require.NotNil(t, d.users, "on by default")
	require.Equal(t, UserRateLimitBurstDefault, d.users.burst)
	require.Nil(t, d.limits, "server clients stay unlimited unless --rate-limit")
	off := endUserGuard(t, iss, func(c *Config) { c.UserRateLimit = -1 })
	require.Nil(t, off.users, "negative turns it off")
}

// TestEndUserConfig: what Check refuses.
func TestEndUserConfig(t *testing.T) {
	t.Parallel()
	require.NoError(t, Config{JWTHS256KeyFile: "k"}.Check("0.0.0.0:1"), "end-user tokens authenticate")
	require.ErrorContains(t, Config{JWKSFile: "j"}.Check("127.0.0.1:1"), "a JWKS needs --auth-jwt-audience")
	require.ErrorContains(t, Config{JWKSFile: "j", JWKSURL: "https://x/j", JWTAudience: "a"}.Check("127.0.0.1:1"), "give one")
	require.ErrorContains(t, Config{JWKSURL: "file:///etc/jwks", JWTAudience: "a"}.Check("127.0.0.1:1"), "http(s) URL")
	require.ErrorContains(t, Config{JWTHS256KeyFile: "k", JWTLeeway: time.Hour}.Check("127.0.0.1:1"), "JWTLeeway")

	short := t.TempDir() + "/short"
	require.NoError(t, os.WriteFile(short, []byte("too-short\n"), 0o600))
	_, err := New(Config{JWTHS256KeyFile: short}, "127.0.0.1:1")
	require.ErrorContains(t, err, "a key of 9 bytes; at least 32")
	bad := t.TempDir() + "/jwks"
	require.NoError(t, os.WriteFile(bad, []byte(`{"keys": []}`), 0o600))
	_, err = New(Config{JWKSFile: bad, JWTAudience: "a"}, "127.0.0.1:1")
	require.ErrorContains(t, err, "no key in it")
}

// TestJWTKeysReload: a rewritten key file or JWKS takes effect (a token
// of the old key is refused even though it was verified before), a broken
// one keeps the keys in force and says so.
func TestJWTKeysReload(t *testing.T) {
	t.Parallel()
	iss, next := jwttest.New(t), jwttest.New(t)
	g := endUserGuard(t, iss, nil)
	oldHS, oldES := iss.HS256(t, jwttest.Claims("alice")), iss.ES256(t, jwttest.Claims("alice"))
	for _, tok := range []string{oldHS, oldES} {
		code, _ := serveAs(t, g, ScopeRead, bearer(tok))
		require.Equal(t, http.StatusOK, code)
	}

	require.NoError(t, os.WriteFile(iss.HS256KeyFile, []byte("short\n"), 0o600))
	require.NoError(t, os.WriteFile(iss.JWKSFile, []byte("{"), 0o600))
	g.Reload()
	require.Contains(t, g.Status(), "JWT HS256 key file")
	require.Contains(t, g.Status(), "JWKS "+iss.JWKSFile+": not JSON")
	require.Equal(t, 1.0, testutil.ToFloat64(g.m.reloadFailures.WithLabelValues(fileJWKS)))
	for _, tok := range []string{oldHS, oldES} {
		code, _ := serveAs(t, g, ScopeRead, bearer(tok))
		require.Equal(t, http.StatusOK, code, "the keys in force still serve")
	}

	require.NoError(t, os.WriteFile(iss.HS256KeyFile, next.HS256Key, 0o600))
	require.NoError(t, os.WriteFile(iss.JWKSFile, next.JWKS, 0o600))
	g.Reload()
	require.Empty(t, g.Status())
	for _, tok := range []string{oldHS, oldES} {
		code, body := serveAs(t, g, ScopeRead, bearer(tok))
		apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid, "a token of a replaced key")
	}
	for _, tok := range []string{next.HS256(t, jwttest.Claims("alice")), next.RS256(t, jwttest.Claims("alice"))} {
		code, body := serveAs(t, g, ScopeRead, bearer(tok))
		require.Equal(t, http.StatusOK, code, body)
	}
}

// TestJWKSURL: the JWK Set is fetched at start; a token naming a key id
// the set lacks fetches it again (at most every 30 s), so a rotated-in
// key serves without a restart; a failed fetch keeps the keys and says so.
func TestJWKSURL(t *testing.T) {
	t.Parallel()
	iss, rotated := jwttest.New(t), jwttest.New(t)
	var served atomic.Pointer[[]byte]
	served.Store(&iss.JWKS)
	var fetches, failing atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if failing.Load() > 0 {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		_, _ = w.Write(*served.Load())
	}))
	t.Cleanup(srv.Close)
	g := endUserGuard(t, iss, func(c *Config) { c.JWTHS256KeyFile, c.JWKSFile, c.JWKSURL = "", "", srv.URL })
	require.EqualValues(t, 1, fetches.Load())
	code, body := serveAs(t, g, ScopeRead, bearer(iss.ES256(t, jwttest.Claims("alice"))))
	require.Equal(t, http.StatusOK, code, body)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	// The provider rotates: its set has both keys' ids, new key material
	// for the new tokens under another kid.
	both := rotatedSet(t, iss, rotated)
	served.Store(&both)
	fresh := signRS256(t, rotated, "rs-2", jwttest.Claims("alice"))
	g.jwksFetched.Store(time.Now().Add(-time.Minute).UnixNano()) // the last fetch is long enough ago
	code, body = serveAs(t, g, ScopeRead, bearer(fresh))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid, "refused until the set is fetched again")
	require.Eventually(t, func() bool { c, _ := serveAs(t, g, ScopeRead, bearer(fresh)); return c == http.StatusOK }, 10*time.Second, 10*time.Millisecond)
	seen := fetches.Load()
	require.EqualValues(t, 2, seen)
	// More unknown kids within 30 s fetch nothing.
	for range 5 {
		code, _ = serveAs(t, g, ScopeRead, bearer(unknownKidToken(t, iss)))
		require.Equal(t, http.StatusUnauthorized, code)
	}
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, seen, fetches.Load(), "tokens with made-up key ids do not hammer the provider")

	failing.Store(1)
	g.refreshJWKS(ctx)
	require.Contains(t, g.Status(), "the JWKS failed to load")
	require.Equal(t, 0.0, testutil.ToFloat64(g.m.reloadOK))
	code, _ = serveAs(t, g, ScopeRead, bearer(fresh))
	require.Equal(t, http.StatusOK, code, "the keys in force still serve")
	failing.Store(0)
	g.refreshJWKS(ctx)
	require.Empty(t, g.Status())
}

// rotatedSet is a JWK Set of a's keys and b's RSA key under kid "rs-2".
func rotatedSet(t *testing.T, a, b *jwttest.Issuer) []byte {
	t.Helper()
	var sa, sb struct {
		Keys []map[string]any `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(a.JWKS, &sa))
	require.NoError(t, json.Unmarshal(b.JWKS, &sb))
	for _, k := range sb.Keys {
		if k["kid"] == jwttest.KidRS256 {
			k["kid"] = "rs-2"
			sa.Keys = append(sa.Keys, k)
		}
	}
	out, err := json.Marshal(sa)
	require.NoError(t, err)
	return out
}

// signRS256 signs claims with iss's RSA key under kid.
func signRS256(t *testing.T, iss *jwttest.Issuer, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(iss.RSA)
	require.NoError(t, err)
	return s
}

func unknownKidToken(t *testing.T, iss *jwttest.Issuer) string {
	t.Helper()
	return signRS256(t, iss, "made-up-"+time.Now().Format(time.RFC3339Nano), jwttest.Claims("alice"))
}

// BenchmarkVerifyJWT: the cost of an end-user token on every call: a
// token seen before (the cache: what a browser's calls pay) and the full
// verification of a new one, per algorithm.
func BenchmarkVerifyJWT(b *testing.B) {
	iss := jwttest.New(b)
	g, err := New(Config{JWTHS256KeyFile: iss.HS256KeyFile, JWKSFile: iss.JWKSFile, JWTAudience: jwttest.Audience}, "127.0.0.1:0")
	require.NoError(b, err)
	for alg, tok := range map[string]string{
		"HS256": iss.HS256(b, jwttest.Claims("alice")),
		"RS256": iss.RS256(b, jwttest.Claims("alice")),
		"ES256": iss.ES256(b, jwttest.Claims("alice")),
	} {
		b.Run(alg+"/cached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, r := g.jwt.verify(tok); r != nil {
					b.Fatal(r)
				}
			}
		})
		b.Run(alg+"/full", func(b *testing.B) {
			keys := g.jwt.keys.Load()
			b.ReportAllocs()
			for b.Loop() {
				if _, r := g.jwt.check(keys, tok); r != nil {
					b.Fatal(r)
				}
			}
		})
	}
}
