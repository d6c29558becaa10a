package redisstore

import (
	"flag"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// URLDefault is the dev stack's Redis.
const URLDefault = "redis://127.0.0.1:6379/0"

// ClientConfig is the Redis connection every binary shares.
type ClientConfig struct {
	// URL is the Redis URL (rediss:// for TLS). Defaults to URLDefault.
	URL string
	// Prefix starts every key. Defaults to PrefixDefault.
	Prefix string
}

// RegisterFlags registers --redis-url and --redis-prefix with the config's
// values (or the defaults) as defaults.
func (c *ClientConfig) RegisterFlags(fs *flag.FlagSet) {
	if c.URL == "" {
		c.URL = URLDefault
	}
	if c.Prefix == "" {
		c.Prefix = PrefixDefault
	}
	fs.StringVar(&c.URL, "redis-url", c.URL, "Redis URL of the real-time view (rediss:// for TLS)")
	fs.StringVar(&c.Prefix, "redis-prefix", c.Prefix, "prefix of every Redis key")
}

// NewClient builds the go-redis client the config describes. A failed dial
// is tried once, not go-redis's default five times 100ms apart: a refused
// connection then degrades an answer at once instead of using up its whole
// Redis timeout.
func (c ClientConfig) NewClient() (redis.UniversalClient, error) {
	url := c.URL
	if url == "" {
		url = URLDefault
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parsing redis url: %w", err)
	}
	if opt.DialerRetries == 0 {
		opt.DialerRetries = 1
	}
	return redis.NewClient(opt), nil
}

// StoreConfig is the store's config on this connection.
func (c ClientConfig) StoreConfig() Config { return Config{Prefix: c.Prefix} }
