// Package apiauth guards an HTTP API listener: it authenticates every
// request (a bearer token from a token file, or a client certificate
// verified against a CA), names the client, limits each client's events
// per second, and refuses in the caller's protocol (REST and Connect: HTTP
// 401 or 429; gRPC: Unauthenticated or ResourceExhausted), with Retry-After
// on a rate limit. It also builds the listener's TLS configuration and
// reloads the token file and the server certificate when they change.
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
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
)

// Defaults. Each Config field names its default.
const (
	ReloadIntervalDefault = 5 * time.Second
	MaxClientsDefault     = 10000
	ClientIdleDefault     = 10 * time.Minute
)

// Config configures a Guard. The zero value serves an open API (every
// request passes, named by its remote IP) without a rate limit; Check says
// whether that is allowed on a listen address.
type Config struct {
	// TokenFile lists the accepted bearer tokens, one a line or
	// name:token (see the package's token file format). Empty: no token
	// authentication.
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
	fs.StringVar(&c.TokenFile, "auth-token-file", c.TokenFile, "file of accepted API bearer tokens, one a line or name:token (reloaded on change and SIGHUP); empty: no token auth")
	fs.StringVar(&c.CertFile, "tls-cert-file", c.CertFile, "API listener's TLS certificate (PEM); with --tls-key-file the API serves TLS (h2 and HTTP/1.1)")
	fs.StringVar(&c.KeyFile, "tls-key-file", c.KeyFile, "API listener's TLS private key (PEM)")
	fs.StringVar(&c.ClientCAFile, "tls-client-ca-file", c.ClientCAFile, "CA bundle (PEM) whose client certificates authenticate API callers (mTLS)")
	fs.BoolVar(&c.InsecureAllowUnauthenticated, "insecure-allow-unauthenticated", c.InsecureAllowUnauthenticated, "serve a non-loopback API listener without authentication")
	fs.DurationVar(&c.ReloadInterval, "auth-reload-interval", c.ReloadInterval, "how often the token and certificate files are checked for changes")
	fs.Float64Var(&c.RateLimit, "rate-limit", c.RateLimit, "events per second per API client (token name, certificate subject, else remote IP); 0: no limit")
	fs.IntVar(&c.RateLimitBurst, "rate-limit-burst", c.RateLimitBurst, "events a client may send at once; 0: one second's worth, and at least the largest batch")
	fs.IntVar(&c.MaxClients, "rate-limit-max-clients", c.MaxClients, "most clients whose rate-limit state is kept (idle ones are dropped first)")
	fs.DurationVar(&c.ClientIdle, "rate-limit-client-idle", c.ClientIdle, "a client's rate-limit state is dropped after this long without a call")
}

func (c Config) withDefaults() Config {
	c.ReloadInterval = cmp.Or(c.ReloadInterval, ReloadIntervalDefault)
	c.MaxClients = cmp.Or(c.MaxClients, MaxClientsDefault)
	c.ClientIdle = cmp.Or(c.ClientIdle, ClientIdleDefault)
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
func (c Config) Authenticates() bool { return c.TokenFile != "" || c.ClientCAFile != "" }

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
	if !c.Authenticates() && !c.InsecureAllowUnauthenticated && !IsLoopback(addr) {
		bad("API authentication: the listener %s is not loopback and no authentication is configured: "+
			"set --auth-token-file or --tls-client-ca-file, or --insecure-allow-unauthenticated to serve it open on purpose", addr)
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
	reasonInvalid = "invalid" // a token that is not in the file, or a malformed header
)

type metrics struct {
	rejected    *prometheus.CounterVec
	rateLimited prometheus.Counter
	evictions   prometheus.Counter
}

// Guard authenticates and rate-limits the requests of an API listener.
type Guard struct {
	cfg    Config
	log    *zap.Logger
	m      metrics
	tokens atomic.Pointer[tokenSet]
	cert   atomic.Pointer[tls.Certificate]
	tlsCfg *tls.Config
	limits *limiterTable
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
			Help: "API requests refused as unauthenticated, by reason (missing: no credentials; invalid: an unknown or malformed token).",
		}, []string{"reason"}),
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
	g.loadedFP = fingerprint(g.watchedFiles())
	if cfg.TokenFile != "" {
		s, err := loadTokens(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		g.tokens.Store(s)
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

// Client is an authenticated caller.
type Client struct {
	// Name identifies the caller: "token:<name>", "cert:<subject>" or
	// "ip:<address>" (an open API).
	Name string
	g    *Guard
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
	if !ok || c.g.limits == nil || n <= 0 {
		return nil
	}
	return c.g.take(c.Name, min(n, c.g.cfg.RateLimitBurst-1))
}

func (g *Guard) take(client string, n int) error {
	if n <= 0 {
		return nil
	}
	wait, err := g.limits.take(client, n, time.Now())
	if err != nil {
		g.m.rateLimited.Inc()
		return &RateLimitedError{Client: client, msg: err.Error()}
	}
	if wait > 0 {
		g.m.rateLimited.Inc()
		return &RateLimitedError{Client: client, RetryAfter: wait, msg: fmt.Sprintf(
			"rate limit of %g events/s (burst %d) for client %s exceeded; retry after %s", g.cfg.RateLimit, g.cfg.RateLimitBurst, client, RetryAfterSeconds(wait)+"s")}
	}
	return nil
}

// Wrap authenticates every request to next, charges its client one event,
// and puts the Client in the request's context.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, rj, ok := g.authenticate(r)
		if !ok {
			g.log.Debug("refusing an unauthenticated API request", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path), zap.String("reason", rj.msg))
			rj.write(w, r)
			return
		}
		if g.limits != nil {
			if err := g.take(name, 1); err != nil {
				rl, _ := errors.AsType[*RateLimitedError](err)
				rateLimited(err.Error(), rl.RetryAfter).write(w, r)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, &Client{Name: name, g: g})))
	})
}

// authenticate names the caller: by its bearer token when tokens are
// configured and it sends one, else by its verified client certificate,
// else (open API only) by its remote IP.
func (g *Guard) authenticate(r *http.Request) (string, rejection, bool) {
	tokens := g.tokens.Load()
	var cert *x509.Certificate
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		cert = r.TLS.VerifiedChains[0][0]
	}
	if tokens != nil {
		if h := r.Header.Get("Authorization"); h != "" {
			scheme, token, _ := strings.Cut(h, " ")
			if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
				g.m.rejected.WithLabelValues(reasonInvalid).Inc()
				return "", unauthenticated(`malformed Authorization header: want "Bearer <token>"`), false
			}
			name, ok := tokens.lookup(strings.TrimSpace(token))
			if !ok {
				g.m.rejected.WithLabelValues(reasonInvalid).Inc()
				return "", unauthenticated("invalid bearer token: it is not among the API's accepted tokens"), false
			}
			return "token:" + name, rejection{}, true
		}
	}
	if cert != nil {
		subject := cert.Subject.CommonName
		if subject == "" {
			subject = cert.Subject.String()
		}
		return "cert:" + subject, rejection{}, true
	}
	if g.cfg.Authenticates() {
		g.m.rejected.WithLabelValues(reasonMissing).Inc()
		var msg string
		switch {
		case tokens != nil && g.cfg.ClientCAFile != "":
			msg = `missing credentials: send "Authorization: Bearer <token>" or a client certificate the API's CA signed`
		case tokens != nil:
			msg = `missing bearer token: send "Authorization: Bearer <token>"`
		default:
			msg = "missing client certificate: this API requires mTLS with a certificate its CA signed"
		}
		return "", unauthenticated(msg), false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host, rejection{}, true
}

// Run reloads the token file and the server certificate when they change
// (checked every ReloadInterval) or on SIGHUP, until ctx ends. A file that
// fails to load keeps the previous version and is logged. Without a token
// file or TLS it only waits for ctx.
func (g *Guard) Run(ctx context.Context) error {
	files := g.watchedFiles()
	if len(files) == 0 {
		<-ctx.Done()
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(g.cfg.ReloadInterval)
	defer tick.Stop()
	last := g.loadedFP
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			g.Reload()
			last = fingerprint(files)
		case <-tick.C:
			if fp := fingerprint(files); fp != last {
				last = fp
				g.Reload()
			}
		}
	}
}

// Reload re-reads the token file and the certificate pair now; a file that
// fails to load keeps its previous version.
func (g *Guard) Reload() {
	if g.cfg.TokenFile != "" {
		if s, err := loadTokens(g.cfg.TokenFile); err != nil {
			g.log.Error("reloading the API token file; keeping the previous tokens", zap.Error(err))
		} else {
			g.tokens.Store(s)
			g.log.Info("reloaded the API token file", zap.Int("num_tokens", len(s.digests)))
		}
	}
	if g.cfg.TLS() {
		if err := g.loadCert(); err != nil {
			g.log.Error("reloading the API's TLS certificate; keeping the previous one", zap.Error(err))
		}
	}
}

func (g *Guard) watchedFiles() []string {
	var files []string
	for _, f := range []string{g.cfg.TokenFile, g.cfg.CertFile, g.cfg.KeyFile} {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

// fingerprint is the files' sizes and modification times: what changes
// when a file is rewritten or a Kubernetes Secret volume swaps its link.
func fingerprint(files []string) string {
	var b strings.Builder
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d;", f, st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String()
}
