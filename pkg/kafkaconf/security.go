package kafkaconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms (--kafka-sasl-mechanism).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLMechanisms are the mechanisms Config.SASL accepts.
var SASLMechanisms = []string{SASLPlain, SASLScramSHA256, SASLScramSHA512}

// dialTimeout bounds a TCP dial plus the TLS handshake, as kgo's own
// dialer does (kgo.DialTimeout's default).
const dialTimeout = 10 * time.Second

// TLSConfig is TLS to the brokers.
type TLSConfig struct {
	// Enabled turns TLS on (--kafka-tls). Without CAFile the system roots
	// verify the brokers.
	Enabled bool
	// CAFile is a PEM bundle of the authorities that sign the brokers'
	// certificates (a private CA).
	CAFile string
	// CertFile and KeyFile are the client's certificate and key, for
	// brokers that require mutual TLS; both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name verified in the brokers' certificates
	// (default: the host of each broker's address).
	ServerName string
}

// SASLConfig authenticates the client to the brokers.
type SASLConfig struct {
	// Mechanism is one of SASLMechanisms, or empty for no SASL.
	Mechanism string
	// Username and Password are the credentials (the chart passes the
	// password as RECEIPTS_KAFKA_SASL_PASSWORD from a Secret).
	Username, Password string
}

// ErrConfig wraps an invalid TLS or SASL configuration. Opts cannot fail,
// so a client built from an invalid config fails every connection with it;
// Classify calls it Permanent. Binaries catch it earlier: cli.Parse calls
// Validate through the flags RegisterFlags registered.
var ErrConfig = errors.New("invalid kafka connection config")

// Validate checks the TLS and SASL settings, naming every bad combination,
// and loads the TLS files (so a missing or malformed file fails here, not at
// the first dial).
func (c *Config) Validate() error {
	var errs []error
	t, s := c.TLS, c.SASL
	if !t.Enabled {
		var set []string
		for _, f := range []struct{ flag, v string }{
			{"--kafka-tls-ca-file", t.CAFile}, {"--kafka-tls-cert-file", t.CertFile},
			{"--kafka-tls-key-file", t.KeyFile}, {"--kafka-tls-server-name", t.ServerName},
		} {
			if f.v != "" {
				set = append(set, f.flag)
			}
		}
		if len(set) > 0 {
			errs = append(errs, fmt.Errorf("%s set without --kafka-tls", strings.Join(set, ", ")))
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("--kafka-tls-cert-file and --kafka-tls-key-file go together (mutual TLS needs both)"))
	}
	mech := strings.ToUpper(s.Mechanism)
	switch {
	case mech == "":
		if s.Username != "" || s.Password != "" {
			errs = append(errs, errors.New("--kafka-sasl-username or --kafka-sasl-password set without --kafka-sasl-mechanism"))
		}
	case !slices.Contains(SASLMechanisms, mech):
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %q: want one of %s", s.Mechanism, strings.Join(SASLMechanisms, ", ")))
	default:
		if s.Username == "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-username", mech))
		}
		if s.Password == "" {
			errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-password (or RECEIPTS_KAFKA_SASL_PASSWORD)", mech))
		}
	}
	if len(errs) == 0 && t.Enabled {
		if _, err := t.load(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// load builds the client TLS config from the files.
func (t TLSConfig) load() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading --kafka-tls-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--kafka-tls-ca-file %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading --kafka-tls-cert-file and --kafka-tls-key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// mechanism is the franz-go SASL mechanism of the config (nil for none).
func (s SASLConfig) mechanism() sasl.Mechanism {
	switch strings.ToUpper(s.Mechanism) {
	case SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
	}
	return nil
}

// securityOpts are the dialer and SASL options of the config. An invalid
// config yields a dialer that fails every connection with the reason.
func (c Config) securityOpts() []kgo.Opt {
	if err := c.Validate(); err != nil {
		return []kgo.Opt{kgo.Dialer(func(context.Context, string, string) (net.Conn, error) { return nil, err })}
	}
	var tlsCfg *tls.Config
	if c.TLS.Enabled {
		tlsCfg, _ = c.TLS.load() // Validate loaded it already
	}
	mech := c.SASL.mechanism()
	if tlsCfg == nil && mech == nil {
		return nil
	}
	d := &net.Dialer{Timeout: dialTimeout}
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		conn, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if tlsCfg != nil {
			cfg := tlsCfg.Clone()
			if cfg.ServerName == "" {
				if h, _, err := net.SplitHostPort(host); err == nil {
					cfg.ServerName = h
				}
			}
			tc := tls.Client(conn, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = conn.Close()
				return nil, fmt.Errorf("tls handshake with broker %s: %w", host, err)
			}
			conn = tc
		}
		if mech != nil {
			conn = &saslConn{Conn: conn}
		}
		return conn, nil
	}
	opts := []kgo.Opt{kgo.Dialer(dial)}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts
}

// saslConn turns a broker's silent refusal of the SASL credentials into
// Kafka's own answer. Apache Kafka answers a wrong password with
// SASL_AUTHENTICATION_FAILED and then closes the connection; some brokers
// (kfake, so the dev broker; brokers speaking the pre-KIP-152 raw SASL
// exchange) only close it, which kgo reports as a plain EOF: an outage, as
// far as anyone can tell. When the connection ends while a SaslAuthenticate
// request waits for its answer, the read fails with
// kerr.SaslAuthenticationFailed instead, so kgo handles it as Kafka's own
// answer (requests fail with it; produced records carry it as their last
// error) and Classify calls it Permanent. It watches only the connection's opening
// (ApiVersions, SaslHandshake, SaslAuthenticate); from the first other
// request on it is a plain pass-through.
type saslConn struct {
	net.Conn
	mu sync.Mutex
	// done stops the watch: authentication is over (or the framing could
	// not be followed).
	done bool
	// left is how many bytes of the request being written are still to come.
	left int
	// awaitingAuth is set when a SaslAuthenticate request was written and
	// no byte has been read since.
	awaitingAuth bool
}

func (c *saslConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.done {
		c.track(p)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// track follows the request frames of p: a 4-byte size, then the request
// header starting with the 2-byte API key.
func (c *saslConn) track(p []byte) {
	for len(p) > 0 {
		if c.left == 0 {
			if len(p) < 6 {
				c.done = true // a header split across writes: stop watching
				return
			}
			size := int(int32(binary.BigEndian.Uint32(p)))
			switch key := int16(binary.BigEndian.Uint16(p[4:])); {
			case size < 2:
				c.done = true
				return
			case key == int16(kmsg.SASLAuthenticate):
				c.awaitingAuth = true
			case key != int16(kmsg.ApiVersions) && key != int16(kmsg.SASLHandshake):
				c.done, c.awaitingAuth = true, false
				return
			}
			c.left = 4 + size
		}
		n := min(c.left, len(p))
		c.left -= n
		p = p[n:]
	}
}

func (c *saslConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > 0 {
		c.awaitingAuth = false
	}
	if err != nil && n == 0 && c.awaitingAuth && !c.done {
		c.done = true
		return 0, &saslClosedError{err: err}
	}
	return n, err
}

// saslClosedError is a connection the broker closed in answer to our SASL
// credentials.
type saslClosedError struct{ err error }

func (e *saslClosedError) Error() string {
	return "SASL authentication failed: the broker closed the connection in answer to the credentials " +
		"(wrong username or password, or no credentials for this mechanism): " + e.err.Error()
}

// Unwrap makes it kerr.SaslAuthenticationFailed for kgo (not retried) and
// for Classify (Permanent); the read error itself is kept in the message
// only, so kgo does not retry it as an EOF.
func (e *saslClosedError) Unwrap() error { return kerr.SaslAuthenticationFailed }
