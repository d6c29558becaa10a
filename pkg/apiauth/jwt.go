package apiauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
)

// End-user token bounds and defaults.
const (
	// MaxJWTLength bounds an end-user token: a JWT this large is no
	// identity provider's, and parsing it would cost for nothing.
	MaxJWTLength = 8 << 10
	// MinHS256KeyBytes is the shortest HS256 key accepted: the hash's
	// size, as RFC 7518 asks.
	MinHS256KeyBytes = 32
	// JWTLeewayDefault is the clock skew allowed on exp, nbf and iat.
	JWTLeewayDefault = 30 * time.Second
	// MaxJWTLeeway bounds the leeway: more would keep expired tokens alive.
	MaxJWTLeeway = 5 * time.Minute
	// JWKSRefreshDefault is how often a JWKS URL is fetched again.
	JWKSRefreshDefault = 15 * time.Minute
	// jwksRefetchMin spaces the fetches a token with an unknown key id
	// asks for: a key rotated in at the provider is picked up within it,
	// and tokens with made-up key ids cannot make the gateway hammer it.
	jwksRefetchMin = 30 * time.Second
	// jwksFetchTimeout bounds one fetch of the JWKS URL.
	jwksFetchTimeout = 10 * time.Second
	// verifiedCacheSize bounds the tokens whose verification is kept.
	verifiedCacheSize = 16 << 10
)

// The signing algorithms of end-user tokens: HS256 with the key file,
// RS256 and ES256 with a JWKS. "none" and every other one are refused.
const (
	algHS256 = "HS256"
	algRS256 = "RS256"
	algES256 = "ES256"
)

// jwtKeys are the keys in force, replaced whole on a reload.
type jwtKeys struct {
	hs256 []byte          // nil without --auth-jwt-hs256-key-file
	jwks  keyfunc.Keyfunc // nil without a JWKS (or before its first fetch)
	gen   uint64          // bumped on every change: drops verified tokens
}

// jwtVerifier checks end-user tokens against the keys in force, keeping
// the outcome of each verified token until its expiry (a browser sends one
// token on every call: its signature is checked once).
type jwtVerifier struct {
	parser *jwt.Parser
	keys   atomic.Pointer[jwtKeys]
	leeway time.Duration
	// refetch asks Run to fetch the JWKS URL again (an unknown key id).
	refetch chan struct{}

	mu       sync.Mutex
	verified map[[sha256.Size]byte]verifiedToken
}

// verifiedToken is what a verified token says, for as long as it holds.
type verifiedToken struct {
	user      string
	notBefore time.Time // zero: none
	expires   time.Time
	gen       uint64 // the keys it was verified with
}

func newJWTVerifier(cfg Config) *jwtVerifier {
	// The three algorithms only ("none" and every other one are refused
	// as unverifiable); one whose key is not configured finds no key.
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{algHS256, algRS256, algES256}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.JWTLeeway),
	}
	if cfg.JWTAudience != "" {
		opts = append(opts, jwt.WithAudience(cfg.JWTAudience))
	}
	if cfg.JWTIssuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.JWTIssuer))
	}
	v := &jwtVerifier{
		parser:   jwt.NewParser(opts...),
		leeway:   cfg.JWTLeeway,
		refetch:  make(chan struct{}, 1),
		verified: make(map[[sha256.Size]byte]verifiedToken),
	}
	v.keys.Store(&jwtKeys{})
	return v
}

// setKeys puts new keys in force; tokens verified with the old ones are
// verified again.
func (v *jwtVerifier) setKeys(update func(k *jwtKeys)) {
	for {
		old := v.keys.Load()
		next := *old
		update(&next)
		next.gen = old.gen + 1
		if v.keys.CompareAndSwap(old, &next) {
			return
		}
	}
}

// looksLikeJWT reports whether a bearer token has a JWT's shape (three
// dot-separated parts, the first a JSON object in base64url): only such a
// token is verified as one.
func looksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2 && strings.HasPrefix(token, "eyJ")
}

// jwtRefusal is why an end-user token was refused: the reason for the
// API and a message that names what to fix, never the token.
type jwtRefusal struct {
	reason apierr.Reason
	label  string // auth_rejected_total's reason
	msg    string
}

func (r *jwtRefusal) Error() string { return r.msg }

func (r *jwtRefusal) connectError() *connect.Error { return unauthenticated(r.reason, r.msg) }

// verify returns the user an end-user token names (its sub), or why it is
// refused.
func (v *jwtVerifier) verify(token string) (string, *jwtRefusal) {
	if len(token) > MaxJWTLength {
		return "", refuse(apierr.CredentialsInvalid, fmt.Sprintf("invalid end-user token: longer than %d bytes", MaxJWTLength))
	}
	digest := sha256.Sum256([]byte(token))
	keys := v.keys.Load()
	if user, ok := v.cached(digest, keys.gen, time.Now()); ok {
		return user, nil
	}
	vt, refusal := v.check(keys, token)
	if refusal != nil {
		return "", refusal
	}
	v.remember(digest, vt)
	return vt.user, nil
}

// check verifies a token's signature and claims with keys.
func (v *jwtVerifier) check(keys *jwtKeys, token string) (verifiedToken, *jwtRefusal) {
	var claims jwt.RegisteredClaims
	_, err := v.parser.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) { return v.key(keys, t) })
	if err != nil {
		return verifiedToken{}, v.refusal(err, &claims)
	}
	if err := receipt.ValidateID("sub", claims.Subject); err != nil {
		return verifiedToken{}, refuse(apierr.CredentialsInvalid, "invalid end-user token: its sub claim is not a user id: "+err.Error())
	}
	vt := verifiedToken{user: claims.Subject, expires: claims.ExpiresAt.Time, gen: keys.gen}
	if claims.NotBefore != nil {
		vt.notBefore = claims.NotBefore.Time
	}
	return vt, nil
}

// cached answers a token verified before with the same keys, while its
// times still hold.
func (v *jwtVerifier) cached(digest [sha256.Size]byte, gen uint64, now time.Time) (string, bool) {
	v.mu.Lock()
	vt, ok := v.verified[digest]
	v.mu.Unlock()
	if !ok || vt.gen != gen || !now.Before(vt.expires.Add(v.leeway)) || now.Add(v.leeway).Before(vt.notBefore) {
		return "", false
	}
	return vt.user, true
}

// remember keeps a verified token; a full cache drops an arbitrary part
// of itself first (map order), which costs those tokens one verification.
func (v *jwtVerifier) remember(digest [sha256.Size]byte, vt verifiedToken) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.verified) >= verifiedCacheSize {
		n := 0
		for k := range v.verified {
			delete(v.verified, k)
			if n++; n >= verifiedCacheSize/8 {
				break
			}
		}
	}
	v.verified[digest] = vt
}

// key is the verification key of t: the HS256 key, or the JWKS key its
// kid names (every JWKS key of its algorithm without a kid).
func (v *jwtVerifier) key(keys *jwtKeys, t *jwt.Token) (any, error) {
	switch t.Method.Alg() {
	case algHS256:
		if keys.hs256 == nil {
			return nil, errNoKey
		}
		return keys.hs256, nil
	case algRS256, algES256:
		if keys.jwks == nil {
			v.askRefetch() // the first fetch may have failed
			return nil, errNoKey
		}
		k, err := keys.jwks.KeyfuncCtx(context.Background())(t)
		if errors.Is(err, jwkset.ErrKeyNotFound) {
			v.askRefetch()
			return nil, errUnknownKey
		}
		return k, err
	}
	return nil, errNoKey
}

var (
	errNoKey      = errors.New("no key for its algorithm")
	errUnknownKey = errors.New("unknown key id")
)

func (v *jwtVerifier) askRefetch() {
	select {
	case v.refetch <- struct{}{}:
	default:
	}
}

func refuse(reason apierr.Reason, msg string) *jwtRefusal {
	label := reasonInvalid
	if reason == apierr.CredentialsExpired {
		label = reasonExpired
	}
	return &jwtRefusal{reason: reason, label: label, msg: msg}
}

// refusal names why golang-jwt refused a token, in the API's terms
// (claims are what it parsed).
func (v *jwtVerifier) refusal(err error, claims *jwt.RegisteredClaims) *jwtRefusal {
	const p = "invalid end-user token: "
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return refuse(apierr.CredentialsExpired, "end-user token expired: get a new one")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && claims.ExpiresAt == nil:
		return refuse(apierr.CredentialsInvalid, p+"it has no exp claim (an end-user token must expire)")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && len(claims.Audience) == 0:
		return refuse(apierr.CredentialsInvalid, p+"its aud does not name this API (it has none)")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && claims.Issuer == "":
		return refuse(apierr.CredentialsInvalid, p+"its iss is not the accepted issuer (it has none)")
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return refuse(apierr.CredentialsInvalid, p+"not valid yet (its nbf or iat is in the future)")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return refuse(apierr.CredentialsInvalid, p+"its aud does not name this API")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return refuse(apierr.CredentialsInvalid, p+"its iss is not the accepted issuer")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse(apierr.CredentialsInvalid, p+"its signature does not verify")
	case errors.Is(err, errUnknownKey):
		return refuse(apierr.CredentialsInvalid, p+"its kid names no key of the API's JWKS")
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, errNoKey):
		return refuse(apierr.CredentialsInvalid, p+"signed with an algorithm or key the API does not accept (HS256 with the key file; RS256, ES256 with the JWKS)")
	case errors.Is(err, jwt.ErrTokenMalformed):
		return refuse(apierr.CredentialsInvalid, p+"malformed")
	}
	return refuse(apierr.CredentialsInvalid, p+"its claims do not hold")
}

// loadHS256Key reads the HS256 key: the file's bytes, one trailing
// newline trimmed (what an editor or echo adds).
func loadHS256Key(path string) ([]byte, error) {
	data, err := readBounded(path, "JWT HS256 key file")
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	if len(data) < MinHS256KeyBytes {
		return nil, fmt.Errorf("JWT HS256 key file %s: a key of %d bytes; at least %d are needed", path, len(data), MinHS256KeyBytes)
	}
	return data, nil
}

// parseJWKS reads a JWK Set of verification keys (RS256, ES256).
func parseJWKS(data []byte, source string) (keyfunc.Keyfunc, error) {
	if !json.Valid(data) {
		return nil, fmt.Errorf("JWKS %s: not JSON", source)
	}
	kf, err := keyfunc.NewJWKSetJSON(data)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", source, err)
	}
	all, err := kf.Storage().KeyReadAll(context.Background())
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", source, err)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("JWKS %s: no key in it", source)
	}
	return kf, nil
}

// fetchJWKS reads the JWK Set at url.
func fetchJWKS(ctx context.Context, client *http.Client, url string) (keyfunc.Keyfunc, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("JWKS URL: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the JWKS %s: HTTP %d", url, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxTokenFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetching the JWKS %s: %w", url, err)
	}
	if len(data) > MaxTokenFileBytes {
		return nil, fmt.Errorf("JWKS %s: larger than %d bytes", url, MaxTokenFileBytes)
	}
	return parseJWKS(data, url)
}

// loadJWTKeys sets up end-user tokens when they are configured: the HS256
// key and the JWKS file must load; a JWKS URL that cannot be fetched now
// is fetched again by Run (until then RS256 and ES256 tokens are refused,
// and Status says why), so an identity provider's outage does not keep
// the gateway from serving server tokens.
func (g *Guard) loadJWTKeys() error {
	if !g.cfg.EndUserTokens() {
		return nil
	}
	g.jwt = newJWTVerifier(g.cfg)
	if g.cfg.JWTHS256KeyFile != "" {
		key, err := loadHS256Key(g.cfg.JWTHS256KeyFile)
		if err != nil {
			return err
		}
		g.jwt.setKeys(func(k *jwtKeys) { k.hs256 = key })
	}
	if g.cfg.JWKSFile != "" {
		kf, err := loadJWKSFile(g.cfg.JWKSFile)
		if err != nil {
			return err
		}
		g.jwt.setKeys(func(k *jwtKeys) { k.jwks = kf })
	}
	if g.cfg.JWKSURL != "" {
		g.jwksClient = &http.Client{Timeout: jwksFetchTimeout}
		g.refreshJWKS(context.Background())
	}
	return nil
}

func loadJWKSFile(path string) (keyfunc.Keyfunc, error) {
	data, err := readBounded(path, "JWKS file")
	if err != nil {
		return nil, err
	}
	return parseJWKS(data, path)
}

// reloadJWTFiles re-reads the HS256 key file and the JWKS file; failed
// names each one that failed (its previous version stays in force).
func (g *Guard) reloadJWTFiles(failed func(file string, err error)) {
	if g.cfg.JWTHS256KeyFile != "" {
		if key, err := loadHS256Key(g.cfg.JWTHS256KeyFile); err != nil {
			g.log.Error("reloading the JWT HS256 key file; keeping the previous key", zap.Error(err))
			failed(fileHS256Key, err)
		} else if !bytes.Equal(key, g.jwt.keys.Load().hs256) {
			g.jwt.setKeys(func(k *jwtKeys) { k.hs256 = key })
			g.log.Info("reloaded the JWT HS256 key file")
		}
	}
	if g.cfg.JWKSFile != "" {
		if kf, err := loadJWKSFile(g.cfg.JWKSFile); err != nil {
			g.log.Error("reloading the JWKS file; keeping the previous keys", zap.Error(err))
			failed(fileJWKS, err)
		} else {
			g.jwt.setKeys(func(k *jwtKeys) { k.jwks = kf })
			g.log.Info("reloaded the JWKS file")
		}
	}
}

// refreshJWKS fetches the JWKS URL and puts its keys in force; a failed
// fetch keeps the previous keys, counts and shows in Status.
func (g *Guard) refreshJWKS(ctx context.Context) {
	g.jwksFetched.Store(time.Now().UnixNano())
	kf, err := fetchJWKS(ctx, g.jwksClient, g.cfg.JWKSURL)
	if err != nil {
		g.log.Error("fetching the JWKS; keeping the previous keys", zap.String("url", g.cfg.JWKSURL), zap.Error(err))
		g.m.reloadFailures.WithLabelValues(fileJWKS).Inc()
		g.jwksErr.Store(&reloadFailure{at: time.Now(), err: err})
		g.updateReloadOK()
		return
	}
	g.jwt.setKeys(func(k *jwtKeys) { k.jwks = kf })
	g.jwksErr.Store(nil)
	g.updateReloadOK()
}

// refreshJWKSSoon fetches the JWKS URL again for a token naming a key id
// it lacks, unless a fetch happened within jwksRefetchMin.
func (g *Guard) refreshJWKSSoon(ctx context.Context) {
	if time.Since(time.Unix(0, g.jwksFetched.Load())) >= jwksRefetchMin {
		g.refreshJWKS(ctx)
	}
}

// updateReloadOK sets auth_last_reload_successful: 1 while neither the
// files nor the JWKS URL failed their last load.
func (g *Guard) updateReloadOK() {
	if g.reloadErr.Load() == nil && g.jwksErr.Load() == nil {
		g.m.reloadOK.Set(1)
		return
	}
	g.m.reloadOK.Set(0)
}
