package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// URLDefault is the dev stack's Redis.
const URLDefault = "redis://127.0.0.1:6379/0"

// ClusterStateReloadInterval is how often a cluster client reloads its
// slot map while in use: after a failover, the bound on how long the
// promoted replica's slots keep failing (measured: a replicated cluster
// fails over in about 8 s, see e2e TestRedisClusterFailover).
const ClusterStateReloadInterval = 2 * time.Second

// Modes of the Redis deployment (--redis-mode).
const (
	// ModeSingle is one server (or a managed endpoint in front of a
	// replicated pair): the URL's host.
	ModeSingle = "single"
	// ModeCluster is Redis Cluster: Addrs are seed nodes, the client
	// follows the slot map, and the drift sweep scans every master.
	ModeCluster = "cluster"
	// ModeSentinel is a master watched by Sentinels: Addrs are the
	// sentinels, SentinelMaster the master's name.
	ModeSentinel = "sentinel"
)

// Modes are the values of ClientConfig.Mode.
var Modes = []string{ModeSingle, ModeCluster, ModeSentinel}

// ErrConfig wraps an invalid connection config.
var ErrConfig = errors.New("invalid redis connection config")

// ClientConfig is the Redis connection every binary shares.
type ClientConfig struct {
	// URL is the Redis URL. In single mode it is the server; in every mode
	// it carries the credentials, the database (single and sentinel), the
	// timeouts and pool options go-redis reads from its query, and TLS
	// (rediss://). Defaults to URLDefault.
	URL string
	// Prefix starts every key. Defaults to PrefixDefault.
	Prefix string
	// Mode is ModeSingle (default), ModeCluster or ModeSentinel.
	Mode string
	// Addrs are the cluster's seed nodes (default: the URL's host) or the
	// sentinels (required), host:port.
	Addrs []string
	// SentinelMaster is the name of the master the sentinels watch.
	SentinelMaster string
	// TLS turns TLS on whatever the URL's scheme (the same as rediss://).
	TLS bool
	// TLSCAFile is a PEM bundle of the authorities that sign the servers'
	// certificates (default: the system roots). Needs TLS or rediss://.
	TLSCAFile string
}

// RegisterFlags registers --redis-url, --redis-prefix, --redis-mode,
// --redis-addrs, --redis-sentinel-master, --redis-tls and
// --redis-tls-ca-file with the config's values (or the defaults) as
// defaults. The mode flag's value validates the whole config once parsing
// is done (cli.Parse calls Validate).
func (c *ClientConfig) RegisterFlags(fs *flag.FlagSet) {
	if c.URL == "" {
		c.URL = URLDefault
	}
	if c.Prefix == "" {
		c.Prefix = PrefixDefault
	}
	if c.Mode == "" {
		c.Mode = ModeSingle
	}
	fs.StringVar(&c.URL, "redis-url", c.URL, "Redis URL: the server in single mode; credentials, database and TLS (rediss://) in every mode")
	fs.StringVar(&c.Prefix, "redis-prefix", c.Prefix, "prefix of every Redis key")
	fs.Var(modeValue{c}, "redis-mode", "Redis deployment: "+strings.Join(Modes, ", "))
	fs.Func("redis-addrs", "cluster seed nodes or sentinel addresses, a comma-separated `host:port` list", func(v string) error {
		c.Addrs = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Addrs = append(c.Addrs, a)
			}
		}
		return nil
	})
	fs.StringVar(&c.SentinelMaster, "redis-sentinel-master", c.SentinelMaster, "name of the master the sentinels watch (sentinel mode)")
	fs.BoolVar(&c.TLS, "redis-tls", c.TLS, "TLS to Redis whatever the URL's scheme (as rediss://), e.g. to cluster nodes or sentinels")
	fs.StringVar(&c.TLSCAFile, "redis-tls-ca-file", c.TLSCAFile, "PEM `file` of the CA that signs the Redis servers' certificates (default: the system roots)")
}

// modeValue is the --redis-mode flag; its Validate checks the whole config.
type modeValue struct{ c *ClientConfig }

func (v modeValue) String() string {
	if v.c == nil {
		return ""
	}
	return v.c.Mode
}

func (v modeValue) Set(s string) error {
	v.c.Mode = strings.ToLower(strings.TrimSpace(s))
	return nil
}

// Validate is ClientConfig.Validate.
func (v modeValue) Validate() error { return v.c.Validate() }

// Validate checks the mode and its settings, naming every bad combination,
// parses the URL and loads the CA file.
func (c ClientConfig) Validate() error {
	_, err := c.options()
	return err
}

// options is the validated config as go-redis options: exactly one of
// the three is set. Every mode honours the caller's context deadline on
// the socket (ContextTimeoutEnabled): without it go-redis bounds a read
// by ReadTimeout alone (5 s), so a hung Redis held each of the gateway's
// calls 5 s per round trip whatever its --redis-timeout.
type options struct {
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

func (c ClientConfig) options() (options, error) {
	var errs []error
	mode := c.Mode
	if mode == "" {
		mode = ModeSingle
	}
	url := c.URL
	if url == "" {
		url = URLDefault
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		errs = append(errs, fmt.Errorf("--redis-url: %w", err))
		opt = &redis.Options{}
	}
	switch mode {
	case ModeSingle:
		if len(c.Addrs) > 0 {
			errs = append(errs, errors.New("--redis-addrs is for cluster and sentinel modes: in single mode the server is --redis-url's host"))
		}
	case ModeCluster:
		if opt.DB != 0 {
			errs = append(errs, fmt.Errorf("--redis-url selects database %d: Redis Cluster has only database 0", opt.DB))
		}
	case ModeSentinel:
		if len(c.Addrs) == 0 {
			errs = append(errs, errors.New("--redis-mode sentinel needs --redis-addrs (the sentinels)"))
		}
	default:
		errs = append(errs, fmt.Errorf("--redis-mode %q: want one of %s", c.Mode, strings.Join(Modes, ", ")))
	}
	if mode == ModeSentinel && c.SentinelMaster == "" {
		errs = append(errs, errors.New("--redis-mode sentinel needs --redis-sentinel-master"))
	}
	if mode != ModeSentinel && c.SentinelMaster != "" {
		errs = append(errs, fmt.Errorf("--redis-sentinel-master is for sentinel mode, not %s", mode))
	}
	tlsCfg := opt.TLSConfig
	if c.TLS && tlsCfg == nil {
		tlsCfg = &tls.Config{}
	}
	if c.TLSCAFile != "" {
		if tlsCfg == nil {
			errs = append(errs, errors.New("--redis-tls-ca-file set without TLS (--redis-tls or a rediss:// URL)"))
		} else if pool, err := loadCA(c.TLSCAFile); err != nil {
			errs = append(errs, err)
		} else {
			tlsCfg.RootCAs = pool
		}
	}
	if len(errs) > 0 {
		return options{}, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	if tlsCfg != nil {
		tlsCfg.MinVersion = max(tlsCfg.MinVersion, tls.VersionTLS12)
	}
	// A failed dial is tried once, not go-redis's default five times 100ms
	// apart: a refused connection then degrades an answer at once instead
	// of using up its whole Redis timeout.
	retries := opt.DialerRetries
	if retries == 0 {
		retries = 1
	}
	switch mode {
	case ModeCluster:
		addrs := c.Addrs
		if len(addrs) == 0 {
			addrs = []string{opt.Addr}
		}
		if tlsCfg != nil {
			// Each node's certificate is verified against the host dialled
			// (ParseURL named the URL's host, one node at most).
			tlsCfg.ServerName = ""
		}
		return options{cluster: &redis.ClusterOptions{
			Addrs: addrs, Username: opt.Username, Password: opt.Password, TLSConfig: tlsCfg,
			Protocol: opt.Protocol, ClientName: opt.ClientName,
			DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout,
			PoolSize: opt.PoolSize, PoolTimeout: opt.PoolTimeout, MinIdleConns: opt.MinIdleConns,
			MaxIdleConns: opt.MaxIdleConns, MaxActiveConns: opt.MaxActiveConns,
			ConnMaxIdleTime: opt.ConnMaxIdleTime, ConnMaxLifetime: opt.ConnMaxLifetime,
			MaxRetries: opt.MaxRetries, MinRetryBackoff: opt.MinRetryBackoff, MaxRetryBackoff: opt.MaxRetryBackoff,
			DialerRetries: retries, ContextTimeoutEnabled: true,
			// go-redis reloads the slot map only on MOVED and every reload
			// interval (60 s by default): a master that dies answers no
			// MOVED, so its slots would fail for up to a minute after its
			// replica took over.
			ClusterStateReloadInterval: ClusterStateReloadInterval,
		}}, nil
	case ModeSentinel:
		if tlsCfg != nil {
			tlsCfg.ServerName = ""
		}
		return options{failover: &redis.FailoverOptions{
			MasterName: c.SentinelMaster, SentinelAddrs: slices.Clone(c.Addrs),
			Username: opt.Username, Password: opt.Password, DB: opt.DB, TLSConfig: tlsCfg,
			Protocol: opt.Protocol, ClientName: opt.ClientName,
			DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout,
			PoolSize: opt.PoolSize, PoolTimeout: opt.PoolTimeout, MinIdleConns: opt.MinIdleConns,
			MaxIdleConns: opt.MaxIdleConns, MaxActiveConns: opt.MaxActiveConns,
			ConnMaxIdleTime: opt.ConnMaxIdleTime, ConnMaxLifetime: opt.ConnMaxLifetime,
			MaxRetries: opt.MaxRetries, MinRetryBackoff: opt.MinRetryBackoff, MaxRetryBackoff: opt.MaxRetryBackoff,
			DialerRetries: retries, ContextTimeoutEnabled: true,
		}}, nil
	}
	opt.TLSConfig = tlsCfg
	opt.DialerRetries = retries
	opt.ContextTimeoutEnabled = true
	return options{single: opt}, nil
}

func loadCA(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading --redis-tls-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--redis-tls-ca-file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// NewClient builds the go-redis client the config describes: a
// *redis.Client (single), a *redis.ClusterClient (cluster) or a failover
// *redis.Client that asks the sentinels for the master (sentinel).
func (c ClientConfig) NewClient() (redis.UniversalClient, error) {
	o, err := c.options()
	switch {
	case err != nil:
		return nil, err
	case o.cluster != nil:
		return redis.NewClusterClient(o.cluster), nil
	case o.failover != nil:
		return redis.NewFailoverClient(o.failover), nil
	}
	return redis.NewClient(o.single), nil
}

// StoreConfig is the store's config on this connection.
func (c ClientConfig) StoreConfig() Config { return Config{Prefix: c.Prefix} }
