package threads

import (
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Store is the kinds' storage over the two drivers: their rows in
// Postgres (postgres.go, changes.go) and their hashes in Redis (redis.go,
// reads.go), what the gateway, the persister, the Specs and the tests
// call. It is two pointers: make one where it is needed.
type Store struct {
	pg    *pgstore.Store
	redis *redisstore.Store
	// beforeCAS, in tests, runs before each CAS round of the register
	// writes (another writer moving a field meanwhile).
	beforeCAS func(attempt int)
}

// NewStore is the kinds' storage on pg and rs (either may be nil when
// the caller uses only the other).
func NewStore(pg *pgstore.Store, rs *redisstore.Store) Store { return Store{pg: pg, redis: rs} }
