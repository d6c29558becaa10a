// Package jwttest mints end-user tokens (JWTs) for tests: an HS256 key
// and RS256 and ES256 keys, with the key file and the JWK Set file the
// gateway reads (--auth-jwt-hs256-key-file, --auth-jwks-file), written
// into a test's temporary directory. Only _test.go files import it:
// nothing generated here is ever committed.
package jwttest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// Audience is the aud of every token Claims makes, and what the gateway
// under test should require (--auth-jwt-audience).
const Audience = "receipts-test"

// Key ids of the JWK Set.
const (
	KidRS256 = "rs-1"
	KidES256 = "es-1"
)

// Issuer is one set of keys, in memory and as files in Dir.
type Issuer struct {
	Dir string
	// HS256Key is the shared key; HS256KeyFile holds it with a trailing
	// newline (which the gateway trims).
	HS256Key     []byte
	HS256KeyFile string
	RSA          *rsa.PrivateKey
	EC           *ecdsa.PrivateKey
	// JWKS is the public JWK Set of RSA and EC (key ids KidRS256,
	// KidES256); JWKSFile holds it.
	JWKS     []byte
	JWKSFile string
}

// New generates an issuer's keys and writes its files.
func New(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{Dir: t.TempDir(), HS256Key: make([]byte, 32)}
	_, err := rand.Read(i.HS256Key)
	require.NoError(t, err)
	// Printable, as an operator's key file would be.
	i.HS256Key = []byte(hex.EncodeToString(i.HS256Key))
	i.RSA, err = rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	i.EC, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	i.JWKS = i.publicJWKS(t)
	i.HS256KeyFile = filepath.Join(i.Dir, "hs256.key")
	require.NoError(t, os.WriteFile(i.HS256KeyFile, append(append([]byte{}, i.HS256Key...), '\n'), 0o600))
	i.JWKSFile = filepath.Join(i.Dir, "jwks.json")
	require.NoError(t, os.WriteFile(i.JWKSFile, i.JWKS, 0o600))
	return i
}

func (i *Issuer) publicJWKS(t testing.TB) []byte {
	t.Helper()
	ctx := context.Background()
	store := jwkset.NewMemoryStorage()
	for kid, k := range map[string]struct {
		pub any
		alg jwkset.ALG
	}{KidRS256: {&i.RSA.PublicKey, jwkset.AlgRS256}, KidES256: {&i.EC.PublicKey, jwkset.AlgES256}} {
		jwk, err := jwkset.NewJWKFromKey(k.pub, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: k.alg, USE: jwkset.UseSig}})
		require.NoError(t, err)
		require.NoError(t, store.KeyWrite(ctx, jwk))
	}
	raw, err := store.JSONPublic(ctx)
	require.NoError(t, err)
	return raw
}

// Claims are a valid token's claims for user: sub, aud Audience, iat now,
// exp in an hour. Change or delete entries to make a bad one.
func Claims(user string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"sub": user, "aud": Audience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// HS256 signs claims with the HS256 key.
func (i *Issuer) HS256(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(i.HS256Key)
	require.NoError(t, err)
	return s
}

// RS256 signs claims with the RSA key, naming its key id.
func (i *Issuer) RS256(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = KidRS256
	s, err := tok.SignedString(i.RSA)
	require.NoError(t, err)
	return s
}

// ES256 signs claims with the EC key, naming its key id.
func (i *Issuer) ES256(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = KidES256
	s, err := tok.SignedString(i.EC)
	require.NoError(t, err)
	return s
}
