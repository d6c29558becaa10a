package mentions

import (
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Store is the kind's storage over the two drivers: its rows in Postgres
// (postgres.go) and its hash per user in Redis (redis.go), what the
// gateway, the Spec and the tests call. It is two pointers and the
// retention: make one where it is needed.
type Store struct {
	pg    *pgstore.Store
	redis *redisstore.Store
	// mentionCap is the retention: each key keeps its newest cap+1 seqs,
	// in every statement and script the store runs.
	mentionCap int
}

// NewStore is the kind's storage on pg and rs (either may be nil when
// the caller uses only the other), keeping channel.MentionCapDefault+1
// seqs per key until WithMentionCap says otherwise.
func NewStore(pg *pgstore.Store, rs *redisstore.Store) Store {
	return Store{pg: pg, redis: rs, mentionCap: channel.MentionCapDefault}
}

// WithMentionCap is s keeping each key's newest n+1 seqs (n <= 0: the
// default): the deployment's cap, agreed at start, given once here.
func (s Store) WithMentionCap(n int) Store {
	if n > 0 {
		s.mentionCap = n
	}
	return s
}
