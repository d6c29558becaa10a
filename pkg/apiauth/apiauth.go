// Package apiauth guards an HTTP API listener: it authenticates every
// request (a server's bearer token from a token file, a client certificate
// verified against a CA, or an end-user's JWT signed with the HS256 key
// file or a key of the JWKS), names the client, its scopes (mark, notify,
// read, watch, erase: what it may call) and, for an end-user token, its
// user; limits each client's events per second (each end-user's by
// default); and refuses in the caller's protocol (REST and Connect: HTTP
// 401 or 429; gRPC: Unauthenticated or ResourceExhausted), with
// Retry-After on a rate limit. Require checks a call's scope; the
// transport answers a missing one as HTTP 403 / PermissionDenied, and
// holds an end-user token to its own user. It also builds the listener's
// TLS configuration and reloads the token file, the client scopes file,
// the JWT keys and the server certificate when they change: a file that
// fails to reload keeps the previous version in force, and Status and a
// metric say so.
package apiauth

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/apierr"
)

// Defaults. Each Config field names its default.
const (
	ReloadIntervalDefault = 5 * time.Second
	MaxClientsDefault     = 10000
	ClientIdleDefault     = 10 * time.Minute
	// UserRateLimitDefault is each end-user's events per second: a person
	// clicking through channels sends a few; a script sends thousands.
	UserRateLimitDefault = 20
	// UserRateLimitBurstDefault lets a client's start (inbox, counts,
	// ticks of the open channel, a watch) through at once.
	UserRateLimitBurstDefault = 100
	// MaxUsersDefault bounds the per-user limiter table.
	MaxUsersDefault = 100_000
	// UserIdleDefault is how long an end-user's limiter is kept without a
	// call: its bucket has refilled by then.
	UserIdleDefault = time.Minute
)

// Config configures a Guard. The zero value serves an open API (every
// request passes, named by its remote IP) without a rate limit; Check says
// whether that is allowed on a listen address.
type Config struct {
	// TokenFile lists the accepted bearer tokens, one a line: token,
	// name:token or name:token:scope,scope (see loadTokens). Empty: no
	// token authentication.
	TokenFile string
	// ReloadInterval is how often the token file and the certificate
	// files are checked for a change (SIGHUP reloads at once). Defaults to
	// ReloadIntervalDefault.
	ReloadInterval time.Duration

	// CertFile and KeyFile make the listener TLS (h2 and http/1.1 by
	// ALPN). Both or neither.
	CertFile, KeyFile string
	// ClientCAFile authenticates clients by certificate (mTLS): a
	// certificate it signs authenticates its caller. Requires CertFile.
	ClientCAFile string
	// ClientScopesFile gives certificate clients their scopes by subject,
	// one a line: subject or subject:scope,scope (see loadClientScopes);
	// an unlisted subject holds none. Empty: every certificate the CA
	// signs holds DefaultScopes. Requires ClientCAFile.
	ClientScopesFile string

	// JWTHS256KeyFile holds the key of end-user tokens signed HS256: the
	// file's bytes, one trailing newline trimmed, at least
	// MinHS256KeyBytes. Empty: no HS256 tokens.
	JWTHS256KeyFile string
	// JWKSFile and JWKSURL give the JWK Set whose keys verify end-user
	// tokens signed RS256 or ES256 (at most one of them). The file is
	// reloaded when it changes, the URL fetched every JWKSRefresh and when
	// a token names a key id it lacks (at most every 30 s). The parsed
	// keys are kept between reloads.
	JWKSFile, JWKSURL string
	// JWKSRefresh is how often JWKSURL is fetched. Defaults to
	// JWKSRefreshDefault.
	JWKSRefresh time.Duration
	// JWTAudience, when set, must be among a token's aud. Required with a
	// JWKS: an identity provider signs tokens for other services too.
	JWTAudience string
	// JWTIssuer, when set, must be a token's iss.
	JWTIssuer string
	// JWTLeeway is the clock skew allowed on exp, nbf and iat. Defaults
	// to JWTLeewayDefault.
	JWTLeeway time.Duration

	// InsecureAllowUnauthenticated lets a non-loopback listener serve
	// without any authentication.
	InsecureAllowUnauthenticated bool

	// RateLimit is each client's sustained events per second; 0 turns
	// rate limiting off.
	RateLimit float64
	// RateLimitBurst is how many events a client may send at once above
	// the rate. Defaults to RateLimit (one second's worth), at least 1.
	RateLimitBurst int
	// MaxClients bounds the per-client limiter table. Defaults to
	// MaxClientsDefault.
	MaxClients int
	// ClientIdle is how long a client's limiter is kept without a call.
	// Defaults to ClientIdleDefault.
	ClientIdle time.Duration
	// UserRateLimit is each end-user's sustained events per second (an
	// end-user token's own budget, whatever RateLimit says). Defaults to
	// UserRateLimitDefault; negative turns it off.
	UserRateLimit float64
	// UserRateLimitBurst is how many events an end-user may send at
	// once. Defaults to UserRateLimitBurstDefault.
	UserRateLimitBurst int
	// MaxUsers bounds the per-user limiter table. Defaults to
	// MaxUsersDefault.
	MaxUsers int

	// Metrics are named Namespace_Subsystem_name.
	Namespace, Subsystem string
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer defaults to a private registry.
	Registerer prometheus.Registerer
}

// RegisterFlags registers the guard's flags with the config's values as
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	c.ReloadInterval, c.MaxClients, c.ClientIdle = d.ReloadInterval, d.MaxClients, d.ClientIdle
	c.JWTLeeway, c.JWKSRefresh = d.JWTLeeway, d.JWKSRefresh
	c.UserRateLimit, c.UserRateLimitBurst, c.MaxUsers = d.UserRateLimit, d.UserRateLimitBurst, d.MaxUsers
	fs.StringVar(&c.TokenFile, "auth-token-file", c.TokenFile, "file of accepted server bearer tokens, one a line: name:token (scopes mark,notify,read,watch) or name:token:scope,scope (mark, notify, read, watch, erase; write is mark,notify); reloaded on change and SIGHUP; empty: no token auth")
	fs.StringVar(&c.JWTHS256KeyFile, "auth-jwt-hs256-key-file", c.JWTHS256KeyFile, "key of end-user tokens (JWT, HS256): the file's bytes, one trailing newline trimmed, at least 32; reloaded on change; an end-user token acts on its own user (sub) only")
	fs.StringVar(&c.JWKSFile, "auth-jwks-file", c.JWKSFile, "JWK Set (JSON) whose keys verify end-user tokens signed RS256 or ES256; reloaded on change")
	fs.StringVar(&c.JWKSURL, "auth-jwks-url", c.JWKSURL, "URL of the JWK Set whose keys verify end-user tokens signed RS256 or ES256; fetched every --auth-jwks-refresh and when a token names an unknown kid")
	fs.DurationVar(&c.JWKSRefresh, "auth-jwks-refresh", c.JWKSRefresh, "how often --auth-jwks-url is fetched again")
	fs.StringVar(&c.JWTAudience, "auth-jwt-audience", c.JWTAudience, "an end-user token's aud must name this (required with a JWKS)")
	fs.StringVar(&c.JWTIssuer, "auth-jwt-issuer", c.JWTIssuer, "when set, an end-user token's iss must be this")
	fs.DurationVar(&c.JWTLeeway, "auth-jwt-leeway", c.JWTLeeway, "clock skew allowed on an end-user token's exp, nbf and iat")
	fs.StringVar(&c.CertFile, "tls-cert-file", c.CertFile, "API listener's TLS certificate (PEM); with --tls-key-file the API serves TLS (h2 and HTTP/1.1)")
	fs.StringVar(&c.KeyFile, "tls-key-file", c.KeyFile, "API listener's TLS private key (PEM)")
	fs.StringVar(&c.ClientCAFile, "tls-client-ca-file", c.ClientCAFile, "CA bundle (PEM) whose client certificates authenticate API callers (mTLS)")
	fs.StringVar(&c.ClientScopesFile, "tls-client-scopes-file", c.ClientScopesFile, "scopes of mTLS clients by certificate subject, one a line: subject or subject:scope,scope (unlisted: none); empty: every certificate holds write,read,watch")
	fs.BoolVar(&c.InsecureAllowUnauthenticated, "insecure-allow-unauthenticated", c.InsecureAllowUnauthenticated, "serve a non-loopback API listener without authentication")
	fs.DurationVar(&c.ReloadInterval, "auth-reload-interval", c.ReloadInterval, "how often the token and certificate files are checked for changes")
	fs.Float64Var(&c.RateLimit, "rate-limit", c.RateLimit, "events per second per API client (token name, certificate subject, else remote IP); 0: no limit")
	fs.IntVar(&c.RateLimitBurst, "rate-limit-burst", c.RateLimitBurst, "events a client may send at once; 0: one second's worth, and at least the largest batch")
	fs.IntVar(&c.MaxClients, "rate-limit-max-clients", c.MaxClients, "most clients whose rate-limit state is kept (idle ones are dropped first)")
	fs.DurationVar(&c.ClientIdle, "rate-limit-client-idle", c.ClientIdle, "a client's rate-limit state is dropped after this long without a call")
	fs.Float64Var(&c.UserRateLimit, "rate-limit-user", c.UserRateLimit, "events per second per end-user (the sub of a JWT), whatever --rate-limit says; negative: no limit")
	fs.IntVar(&c.UserRateLimitBurst, "rate-limit-user-burst", c.UserRateLimitBurst, "events an end-user may send at once")
	fs.IntVar(&c.MaxUsers, "rate-limit-max-users", c.MaxUsers, "most end-users whose rate-limit state is kept (idle ones are dropped first)")
}

func (c Config) withDefaults() Config {
	c.ReloadInterval = cmp.Or(c.ReloadInterval, ReloadIntervalDefault)
	c.MaxClients = cmp.Or(c.MaxClients, MaxClientsDefault)
	c.ClientIdle = cmp.Or(c.ClientIdle, ClientIdleDefault)
	c.JWTLeeway = cmp.Or(c.JWTLeeway, JWTLeewayDefault)
	c.JWKSRefresh = cmp.Or(c.JWKSRefresh, JWKSRefreshDefault)
	c.UserRateLimit = cmp.Or(c.UserRateLimit, UserRateLimitDefault)
	c.UserRateLimitBurst = cmp.Or(c.UserRateLimitBurst, UserRateLimitBurstDefault)
	c.MaxUsers = cmp.Or(c.MaxUsers, MaxUsersDefault)
	if c.RateLimitBurst == 0 && c.RateLimit > 0 {
		c.RateLimitBurst = max(1, int(c.RateLimit+0.999))
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

// Authenticates reports whether callers must prove who they are.
func (c Config) Authenticates() bool {
	return c.TokenFile != "" || c.ClientCAFile != "" || c.EndUserTokens()
}

// EndUserTokens reports whether end-user tokens (JWTs) are accepted.
func (c Config) EndUserTokens() bool {
	return c.JWTHS256KeyFile != "" || c.JWKSFile != "" || c.JWKSURL != ""
}

// bearerTokens reports whether an Authorization header is read.
func (c Config) bearerTokens() bool { return c.TokenFile != "" || c.EndUserTokens() }

// TLS reports whether the listener serves TLS.
func (c Config) TLS() bool { return c.CertFile != "" }

// Check reports every problem of the config for a listener on addr: an
// API on a non-loopback address must authenticate its callers unless
// InsecureAllowUnauthenticated says otherwise.
func (c Config) Check(addr string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if (c.CertFile == "") != (c.KeyFile == "") {
		bad("TLS: --tls-cert-file and --tls-key-file go together")
	}
	if c.ClientCAFile != "" && c.CertFile == "" {
		bad("TLS: --tls-client-ca-file (mTLS) needs the listener's own --tls-cert-file and --tls-key-file")
	}
	if c.ClientScopesFile != "" && c.ClientCAFile == "" {
		bad("TLS: --tls-client-scopes-file needs --tls-client-ca-file (mTLS)")
	}
	if !c.Authenticates() && !c.InsecureAllowUnauthenticated && !IsLoopback(addr) {
		bad("API authentication: the listener %s is not loopback and no authentication is configured: "+
			"set --auth-token-file or --tls-client-ca-file, or --insecure-allow-unauthenticated to serve it open on purpose", addr)
	}
	if c.JWKSFile != "" && c.JWKSURL != "" {
		bad("JWT: --auth-jwks-file and --auth-jwks-url: give one")
	}
	if (c.JWKSFile != "" || c.JWKSURL != "") && c.JWTAudience == "" {
		bad("JWT: a JWKS needs --auth-jwt-audience: its provider signs tokens for other services too")
	}
	if c.JWKSURL != "" {
		if u, err := url.Parse(c.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("JWT: --auth-jwks-url must be an http(s) URL")
		}
	}
	if c.JWTLeeway < 0 || c.JWTLeeway > MaxJWTLeeway {
		bad("JWTLeeway: must be within [0, %s], got %s", MaxJWTLeeway, c.JWTLeeway)
	}
	if c.JWKSRefresh < 0 {
		bad("JWKSRefresh: must be positive")
	}
	if c.UserRateLimit > 1e9 || c.UserRateLimitBurst < 0 || c.UserRateLimitBurst > 1e9 {
		bad("UserRateLimit, UserRateLimitBurst: must be within 1e9, got %g and %d", c.UserRateLimit, c.UserRateLimitBurst)
	}
	if c.MaxUsers < 0 || c.MaxUsers > 10_000_000 {
		bad("MaxUsers: must be within [1, 1e7], got %d", c.MaxUsers)
	}
	if c.RateLimit < 0 || c.RateLimit > 1e9 {
		bad("RateLimit: must be within [0, 1e9] events/s, got %g", c.RateLimit)
	}
	if c.RateLimitBurst < 0 || c.RateLimitBurst > 1e9 {
		bad("RateLimitBurst: must be within [0, 1e9], got %d", c.RateLimitBurst)
	}
	if c.MaxClients < 0 || c.MaxClients > 10_000_000 {
		bad("MaxClients: must be within [1, 1e7], got %d", c.MaxClients)
	}
	if c.ReloadInterval < 0 || c.ClientIdle < 0 {
		bad("ReloadInterval, ClientIdle: must be positive")
	}
	return errors.Join(errs...)
}

// IsLoopback reports whether a listen address only accepts local
// connections: a loopback IP or "localhost". An empty host listens on
// every interface, so it is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Rejection reasons (label values of auth_rejected_total).
const (
	reasonMissing = "missing" // no credentials at all
	reasonInvalid = "invalid" // a token that is not in the file, or a malformed header or JWT
	reasonExpired = "expired" // an end-user token past its exp
)

type metrics struct {
	rejected       *prometheus.CounterVec
	forbidden      *prometheus.CounterVec
	reloadFailures *prometheus.CounterVec
	reloadOK       prometheus.Gauge
	rateLimited    prometheus.Counter
	evictions      prometheus.Counter
}

// The watched files, as label values of auth_reload_failures_total.
const (
	fileTokens       = "token_file"
	fileClientScopes = "client_scopes_file"
	fileCertificate  = "tls_certificate"
	fileHS256Key     = "jwt_hs256_key_file"
	fileJWKS         = "jwks"
)

// Guard authenticates and rate-limits the requests of an API listener.
type Guard struct {
	cfg    Config
	log    *zap.Logger
	m      metrics
	tokens atomic.Pointer[tokenSet]
	// certScopes is the client scopes file's map (nil without the file).
	certScopes atomic.Pointer[map[string]Scope]
	cert       atomic.Pointer[tls.Certificate]
	// reloadErr is the last reload's failure, nil after one that worked.
	reloadErr atomic.Pointer[reloadFailure]
	tlsCfg    *tls.Config
	limits    *limiterTable
	// jwt verifies end-user tokens (nil when none are accepted); users
	// limits them, one bucket per user (nil: no limit).
	jwt   *jwtVerifier
	users *limiterTable
	// jwksClient fetches JWKSURL; jwksFetched is when it last did (Unix
	// ns), jwksErr its last failure (nil after one that worked).
	jwksClient  *http.Client
	jwksFetched atomic.Int64
	jwksErr     atomic.Pointer[reloadFailure]
	// loadedFP fingerprints the watched files as New found them (taken
	// before loading, so a change while loading is seen as one).
	loadedFP string
}

// New validates cfg for a listener on addr (Check), loads the token file
// and the certificates, and registers the guard's metrics.
func New(cfg Config, addr string) (*Guard, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Check(addr); err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg, log: cfg.Logger.Named("apiauth")}
	f := promauto.With(cfg.Registerer)
	g.m = metrics{
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: cfg.Namespace, Subsystem: cfg.Subsystem, Name: "auth_rejected_total",
			Help: "API requests refused as unauthenticated, by reason (missing: no credentials; invalid: an unknown or malformed token, or an end-user token that does not verify; expired: an end-user token past its exp).",
		}, []string{"reason"}),
		forbidden: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: cfg.Namespace, Subsystem: cfg.Subsystem, Name: "auth_forbidden_total",
			Help: "API calls refused (403 / PermissionDenied) because their client lacks the call's scope, by missing scope.",
		}, []string{"scope"}),
		reloadFailures: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: cfg.Namespace, Subsystem: cfg.Subsystem, Name: "auth_reload_failures_total",
			Help: "Reloads of the token file, the client scopes file, the TLS certificate or the JWT keys (HS256 key file, JWKS file or URL) that failed (the previous version stays in force), by file.",
		}, []string{"file"}),
		reloadOK: f.NewGauge(prometheus.GaugeOpts{
			Namespace: cfg.Namespace, Subsystem: cfg.Subsystem, Name: "auth_last_reload_successful",
			Help: "1 when the last reload of the API's auth files (tokens, client scopes, certificate) loaded all of them, 0 when one failed and its previous version is in force.",
		}),
		rateLimited: f.NewCounter(prometheus.CounterOpts{
			Namespace: cfg.Namespace, Subsystem: cfg.Subsystem, Name: "rate_limited_total",
			Help: "API requests refused because their client was over its rate limit.",
		}),
		evictions: f.NewCounter(prometheus.CounterOpts{
			Namespace: cfg.Namespace, Subsystem: cfg.Subsystem, Name: "rate_limit_clients_evicted_total",
			Help: "Clients whose rate-limit state was dropped (idle, or the table was full).",
		}),
	}
	g.m.rejected.WithLabelValues(reasonMissing)
	g.m.rejected.WithLabelValues(reasonInvalid)
	g.m.rejected.WithLabelValues(reasonExpired)
	for _, name := range scopeNames {
		g.m.forbidden.WithLabelValues(name)
	}
	for _, file := range []string{fileTokens, fileClientScopes, fileCertificate, fileHS256Key, fileJWKS} {
		g.m.reloadFailures.WithLabelValues(file)
	}
	g.m.reloadOK.Set(1)
	g.loadedFP = fingerprint(g.watchedFiles())
	if cfg.TokenFile != "" {
		s, err := loadTokens(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		g.storeTokens(s)
	}
	if cfg.ClientScopesFile != "" {
		m, err := loadClientScopes(cfg.ClientScopesFile)
		if err != nil {
			return nil, err
		}
		g.certScopes.Store(&m)
	}
	if err := g.loadJWTKeys(); err != nil {
		return nil, err
	}
	if cfg.TLS() {
		if err := g.loadCert(); err != nil {
			return nil, err
		}
		g.tlsCfg = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			NextProtos:     []string{"h2", "http/1.1"},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return g.cert.Load(), nil },
		}
		if cfg.ClientCAFile != "" {
			pem, err := os.ReadFile(cfg.ClientCAFile)
			if err != nil {
				return nil, fmt.Errorf("reading client CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("client CA file %s: no PEM certificate in it", cfg.ClientCAFile)
			}
			// Verified when given: a caller without a certificate gets a
			// clear 401 (or may use a token) instead of a failed handshake.
			g.tlsCfg.ClientAuth, g.tlsCfg.ClientCAs = tls.VerifyClientCertIfGiven, pool
		}
	}
	if cfg.RateLimit > 0 {
		g.limits = newLimiterTable(cfg.RateLimit, cfg.RateLimitBurst, cfg.MaxClients, cfg.ClientIdle, g.m.evictions.Inc)
		f.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: cfg.Namespace, Subsystem: cfg.Subsystem, Name: "rate_limit_clients",
			Help: "Clients whose rate-limit state is kept.",
		}, func() float64 { return float64(g.limits.size()) })
	}
	if cfg.EndUserTokens() && cfg.UserRateLimit > 0 {
		g.users = newLimiterTable(cfg.UserRateLimit, cfg.UserRateLimitBurst, cfg.MaxUsers, UserIdleDefault, g.m.evictions.Inc)
		f.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: cfg.Namespace, Subsystem: cfg.Subsystem, Name: "rate_limit_users",
			Help: "End-users whose rate-limit state is kept.",
		}, func() float64 { return float64(g.users.size()) })
	}
	return g, nil
}

func (g *Guard) loadCert() error {
	pair, err := tls.LoadX509KeyPair(g.cfg.CertFile, g.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("loading the API's TLS certificate: %w", err)
	}
	g.cert.Store(&pair)
	return nil
}

// TLSConfig is the listener's TLS configuration (h2 and http/1.1, the
// current certificate, client certificates verified when mTLS is on), or
// nil for a plain listener.
func (g *Guard) TLSConfig() *tls.Config { return g.tlsCfg }

// Burst is the most events one call may cost (0 without a rate limit).
func (g *Guard) Burst() int {
	if g.limits == nil {
		return 0
	}
	return g.cfg.RateLimitBurst
}

// storeTokens puts s in force, and warns when it refuses everyone.
func (g *Guard) storeTokens(s *tokenSet) {
	g.tokens.Store(s)
	if len(s.digests) == 0 {
		g.log.Warn("the API token file holds no token: every bearer-token call is refused", zap.String("file", g.cfg.TokenFile))
	}
}

// Client is an authenticated caller.
type Client struct {
	// Name identifies the caller: "token:<name>", "cert:<subject>",
	// "user:<id>" (an end-user token) or "ip:<address>" (an open API).
	Name string
	// Scopes are what it may call (Require): its token's or
	// certificate's, EndUserScopes for an end-user token, AllScopes on
	// an open API.
	Scopes Scope
	// User is the user an end-user token names (its sub): such a client
	// acts on that user only. Empty for a server client.
	User string
	g    *Guard
}

// limits is the rate-limit table the client spends from (nil: none).
func (c *Client) limits() *limiterTable {
	if c.User != "" {
		return c.g.users
	}
	return c.g.limits
}

type clientKey struct{}

// ClientFrom returns the caller Wrap authenticated.
func ClientFrom(ctx context.Context) (*Client, bool) {
	c, ok := ctx.Value(clientKey{}).(*Client)
	return c, ok
}

// RateLimitedError is a call its client's rate limit refused.
type RateLimitedError struct {
	Client     string
	RetryAfter time.Duration
	msg        string
}

func (e *RateLimitedError) Error() string { return e.msg }

// Charge spends n more events of the calling client's rate limit, for a
// call that costs more than the one event Wrap charged at the door (a
// batch of n marks charges n-1). A call never costs more than the burst in
// all: an oversized batch is its validation's to refuse, not the limit's.
// It returns a *RateLimitedError when the events do not fit, and nil
// without a rate limit or a client.
func Charge(ctx context.Context, n int) error {
	c, ok := ClientFrom(ctx)
	if !ok || n <= 0 {
		return nil
	}
	t := c.limits()
	if t == nil {
		return nil
	}
	return c.g.take(t, c.Name, min(n, t.burst-1))
}

func (g *Guard) take(t *limiterTable, client string, n int) error {
	if n <= 0 {
		return nil
	}
	wait, err := t.take(client, n, time.Now())
	if err != nil {
		g.m.rateLimited.Inc()
		return &RateLimitedError{Client: client, msg: err.Error()}
	}
	if wait > 0 {
		g.m.rateLimited.Inc()
		return &RateLimitedError{Client: client, RetryAfter: wait, msg: fmt.Sprintf(
			"rate limit of %g events/s (burst %d) for client %s exceeded; retry after %s", float64(t.limit), t.burst, client, apierr.Seconds(wait)+"s")}
	}
	return nil
}

// Wrap authenticates every request to next, charges its client one event,
// and puts the Client in the request's context.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, rj := g.authenticate(r)
		if rj != nil {
			g.log.Debug("refusing an unauthenticated API request", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path), zap.String("reason", rj.Message()))
			apierr.Write(w, r, rj)
			return
		}
		if t := c.limits(); t != nil {
			if err := g.take(t, c.Name, 1); err != nil {
				apierr.Write(w, r, RateLimited(err))
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, c)))
	})
}

// authenticate names the caller and its scopes: by its bearer token when
// tokens are configured and it sends one (a token of the file, else a JWT
// when end-user tokens are on), else by its verified client certificate,
// else (open API only) by its remote IP, with every scope.
func (g *Guard) authenticate(r *http.Request) (*Client, *connect.Error) {
	if g.cfg.bearerTokens() {
		if h := r.Header.Get("Authorization"); h != "" {
			return g.bearer(h)
		}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		subject := cert.Subject.CommonName
		if subject == "" {
			subject = cert.Subject.String()
		}
		scopes := DefaultScopes
		if m := g.certScopes.Load(); m != nil {
			scopes = (*m)[subject]
		}
		return &Client{Name: "cert:" + subject, Scopes: scopes, g: g}, nil
	}
	if g.cfg.Authenticates() {
		g.m.rejected.WithLabelValues(reasonMissing).Inc()
		var msg string
		switch {
		case g.cfg.bearerTokens() && g.cfg.ClientCAFile != "":
			msg = `missing credentials: send "Authorization: Bearer <token>" or a client certificate the API's CA signed`
		case g.cfg.bearerTokens():
			msg = `missing bearer token: send "Authorization: Bearer <token>"`
		default:
			msg = "missing client certificate: this API requires mTLS with a certificate its CA signed"
		}
		return nil, unauthenticated(apierr.CredentialsMissing, msg)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return &Client{Name: "ip:" + host, Scopes: AllScopes, g: g}, nil
}

// bearer authenticates an Authorization header: a token of the token
// file, else (when end-user tokens are on and it has a JWT's shape) an
// end-user token.
func (g *Guard) bearer(header string) (*Client, *connect.Error) {
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		g.m.rejected.WithLabelValues(reasonInvalid).Inc()
		return nil, unauthenticated(apierr.CredentialsInvalid, `malformed Authorization header: want "Bearer <token>"`)
	}
	if tokens := g.tokens.Load(); tokens != nil {
		if name, scopes, ok := tokens.lookup(token); ok {
			return &Client{Name: "token:" + name, Scopes: scopes, g: g}, nil
		}
	}
	if g.jwt != nil && looksLikeJWT(token) {
		user, refusal := g.jwt.verify(token)
		if refusal != nil {
			g.m.rejected.WithLabelValues(refusal.label).Inc()
			return nil, refusal.connectError()
		}
		return &Client{Name: "user:" + user, Scopes: EndUserScopes, User: user, g: g}, nil
	}
	g.m.rejected.WithLabelValues(reasonInvalid).Inc()
	return nil, unauthenticated(apierr.CredentialsInvalid, "invalid bearer token: it is not among the API's accepted tokens")
}
