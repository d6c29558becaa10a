package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Defaults.
const (
	AddrDefault   = "127.0.0.1:6379"
	PrefixDefault = "receipts:"
	// loadedField marks a hash hydrated from Postgres; it starts with ':'
	// so no channel id can collide with it (receipt.ValidateID).
	loadedField = ":loaded"
	// hydrateChunk bounds one hydrate script call.
	hydrateChunk = 256
)

// ErrUnavailable wraps every Redis failure: the caller treats the real-time
// view as degraded and relies on the durable path and the repairs.
var ErrUnavailable = errors.New("redis unavailable")

// Config configures a Store.
type Config struct {
	// Prefix starts every key. Defaults to PrefixDefault.
	Prefix string
	// Undecodable, when set, counts the stored fields a read skipped
	// because they could not be decoded (a value no writer of this
	// version produces: see SkipUndecodable).
	Undecodable prometheus.Counter
}

// Store is the Redis side of the receipts state.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	// undecodable counts the fields reads skipped (nil: not counted).
	undecodable prometheus.Counter
}

// New wraps a go-redis client (single node or cluster).
func New(rdb redis.UniversalClient, cfg Config) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = PrefixDefault
	}
	return &Store{rdb: rdb, prefix: cfg.Prefix, undecodable: cfg.Undecodable}
}

// Client returns the underlying client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Prefix returns the key prefix.
func (s *Store) Prefix() string { return s.prefix }

// registered are the scripts every Load loads besides the store's own:
// those a kind registered (Register) because the gateway runs them by SHA
// in pipelines of its own.
var (
	registeredMu sync.Mutex
	registered   []*redis.Script
)

// Register adds scripts to those every Load loads (a kind's, registered
// when its package is initialised) and returns them.
func Register(scripts ...*redis.Script) []*redis.Script {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	registered = append(registered, scripts...)
	return scripts
}

// Load registers the store's scripts, the registered ones (Register) and
// extra (a kind's: kind.Scripts) so that EVALSHA finds them (go-redis
// also falls back to EVAL on NOSCRIPT, e.g. after a Redis restart).
func (s *Store) Load(ctx context.Context, extra ...*redis.Script) error {
	scripts := []*redis.Script{markerCheckScript, markerRenewScript, markerSwapScript, readMarksScript, eraseScript, rememberScript}
	registeredMu.Lock()
	scripts = append(scripts, registered...)
	registeredMu.Unlock()
	for _, sc := range append(scripts, extra...) {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("%w: loading script: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// Ping checks Redis.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// SkipUndecodable counts a stored field a read skipped because it could
// not be decoded: one bad field (a value no writer of this version
// produces, such as an epoch past what int64 holds) never fails a whole
// user's read or a drift sweep page. The field reads as absent; the next
// merge into it replaces it (the merge script and MergeMarks treat an
// undecodable value as none), and the drift sweep rewrites it from
// Postgres.
func (s *Store) SkipUndecodable() {
	if s.undecodable != nil {
		s.undecodable.Inc()
	}
}

// ScanCursor is a position in a walk over the users held in Redis (the
// drift sweep's). The zero value starts a walk; Done reports its end. On a
// single server (or a sentinel's master) it is the SCAN cursor. In Redis
// Cluster a SCAN cursor belongs to one node, so the walk visits every
// master in turn, in bounded pages: the cursor names the masters (their
// addresses, fixed when the walk starts), the one being scanned and its
// SCAN cursor.
type ScanCursor struct {
	masters []string
	node    int
	cursor  uint64
	done    bool
	// scanned is the master the page that returned this cursor came from.
	scanned string
}

// Done reports whether the walk is over.
func (c ScanCursor) Done() bool { return c.done }

// Node is the address of the master the next page scans ("" outside
// cluster mode, or before the first page).
func (c ScanCursor) Node() string {
	if c.node < len(c.masters) {
		return c.masters[c.node]
	}
	return ""
}

// Scanned is the address of the master the page that returned this cursor
// was read from ("" outside cluster mode).
func (c ScanCursor) Scanned() string { return c.scanned }

func (c ScanCursor) String() string {
	switch {
	case c.done:
		return "done"
	case c.masters == nil:
		return strconv.FormatUint(c.cursor, 10)
	}
	return fmt.Sprintf("master %d/%d %s, cursor %d", c.node+1, len(c.masters), c.Node(), c.cursor)
}

// scanKeys returns one bounded page of the keys matching pattern and the
// cursor of the next page, walking every master in cluster mode (see
// ScanUsers).
func (s *Store) scanKeys(ctx context.Context, cur ScanCursor, count int64, pattern string) ([]string, ScanCursor, error) {
	if cur.done {
		return nil, cur, nil
	}
	var node redis.Cmdable = s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		if cur.masters == nil {
			masters, err := clusterMasters(ctx, cc)
			if err != nil {
				return nil, cur, err
			}
			cur.masters = masters
		}
		if len(cur.masters) == 0 {
			return nil, ScanCursor{done: true}, nil
		}
		var err error
		if node, err = clusterMaster(ctx, cc, cur.Node()); err != nil {
			return nil, cur, err
		}
	}
	keys, next, err := node.Scan(ctx, cur.cursor, pattern, count).Result()
	if err != nil {
		return nil, cur, fmt.Errorf("%w: scanning %s: %w", ErrUnavailable, cur, err)
	}
	cur.scanned = cur.Node()
	cur.cursor = next
	if next == 0 {
		cur.node++
		cur.done = cur.node >= len(cur.masters)
	}
	return keys, cur, nil
}

// clusterMasters lists the masters' addresses, sorted.
func clusterMasters(ctx context.Context, cc *redis.ClusterClient) ([]string, error) {
	var mu sync.Mutex
	masters := []string{}
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		masters = append(masters, c.Options().Addr)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: listing redis cluster masters: %w", ErrUnavailable, err)
	}
	slices.Sort(masters)
	return slices.Compact(masters), nil
}

// clusterMaster is the client of the master at addr.
func clusterMaster(ctx context.Context, cc *redis.ClusterClient, addr string) (*redis.Client, error) {
	var mu sync.Mutex
	var found *redis.Client
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: listing redis cluster masters: %w", ErrUnavailable, err)
	}
	if found == nil {
		return nil, fmt.Errorf("%w: redis cluster node %s is no longer a master (failover or resharding during the walk; the next one starts over)", ErrUnavailable, addr)
	}
	return found, nil
}
