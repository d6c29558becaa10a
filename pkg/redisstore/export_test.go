package redisstore

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
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

// mentionsKey is the mention kind's key of a user (mentions.Store.RedisKey),
// which the driver's tests may not import.
func mentionsKey(s *Store, user string) string { return s.prefix + "mh:{" + user + "}" }

// PutMentions stands in for the mention kind's writes (pkg/kinds/mentions,
// which the driver's tests may not import), so the unread view has
// mentions to count: it sets each key's stored list to the newest cap+1
// of its seqs, as the kind keeps them (a set, not a union with what is
// stored).
func PutMentions(tb testing.TB, s *Store, mentionCap int, ms ...channel.Mentions) {
	tb.Helper()
	ctx := context.Background()
	_, err := s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, m := range ms {
			kept := channel.MergeMentions(nil, m.Seqs, mentionCap)
			padded := make([]string, len(kept))
			for i, q := range kept {
				padded[i] = padSeq(q)
			}
			pipe.HSet(ctx, mentionsKey(s, m.Key.User), m.Key.Channel, strings.Join(padded, " "))
		}
		return nil
	})
	require.NoError(tb, err)
}

// HydrateMembershipsAndMentions is HydrateMemberships with the user's
// mentions put (PutMentions) and their hash marked hydrated, as the
// gateway hydrates both: the unread view is complete once both are.
func HydrateMembershipsAndMentions(tb testing.TB, s *Store, user string, regs []channel.Membership, mentionCap int, ms ...channel.Mentions) {
	tb.Helper()
	PutMentions(tb, s, mentionCap, ms...)
	require.NoError(tb, s.rdb.HSet(context.Background(), mentionsKey(s, user), loadedField, "1").Err())
	require.NoError(tb, s.HydrateMemberships(context.Background(), user, regs))
}
