package threads

import (
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Store is the kinds' storage over the two drivers: their rows in
// Postgres (postgres.go, changes.go) and their hashes in Redis (redis.go,
// reads.go), what the gateway, the persister, the Specs and the tests
// call. It is two pointers and the mention retention: make one where it
// is needed.
type Store struct {
	pg    *pgstore.Store
	redis *redisstore.Store
	// mentionCap is the retention of a register's mentions (its newest
	// cap+1), in every merge (thread.Merge) the store runs.
	mentionCap int
	// beforeCAS, in tests, runs before each CAS round of the register
	// writes (another writer moving a field meanwhile).
	beforeCAS func(attempt int)
}

// NewStore is the kinds' storage on pg and rs (either may be nil when
// the caller uses only the other), keeping channel.MentionCapDefault+1
// mentions per register until WithMentionCap says otherwise.
func NewStore(pg *pgstore.Store, rs *redisstore.Store) Store {
	return Store{pg: pg, redis: rs, mentionCap: channel.MentionCapDefault}
}

// WithMentionCap is s keeping each register's newest n+1 mentions (n <=
// 0: the default): the deployment's cap, agreed at start, given once
// here.
func (s Store) WithMentionCap(n int) Store {
	if n > 0 {
		s.mentionCap = n
	}
	return s
}
