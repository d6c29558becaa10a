package members

import (
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Store is the kind's storage over the two drivers: its statements in
// Postgres (postgres.go) and its two hashes in Redis (redis.go), what
// the gateway, the views, the Spec and the tests call. It is two
// pointers: make one where it is needed.
type Store struct {
	pg    *pgstore.Store
	redis *redisstore.Store
}

// NewStore is the kind's storage on pg and rs (either may be nil when
// the caller uses only the other).
func NewStore(pg *pgstore.Store, rs *redisstore.Store) Store { return Store{pg: pg, redis: rs} }
