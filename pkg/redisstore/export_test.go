package redisstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Restored marks users' cursor hashes restored, as the
// gateway's restore does before it writes to a user: the writes of the
// store's own tests start from there.
func Restored(t testing.TB, s *Store, users ...string) {
	t.Helper()
	for _, u := range users {
		require.NoError(t, s.markLoaded(context.Background(), s.UserKey(u), Incarnation{}))
	}
}
