package cursors

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Restored marks users' cursor hashes restored, as the
// gateway's restore does before it writes to a user: the writes of the
// store's own tests start from there.
func Restored(t testing.TB, s Store, users ...string) {
	t.Helper()
	for _, u := range users {
		require.NoError(t, s.redis.MarkLoaded(context.Background(), s.RedisKey(u), redisstore.Incarnation{}))
	}
}

// mentionsKey is the mention kind's key of a user (mentions.Store.RedisKey),
// which the driver's tests may not import.
func mentionsKey(s Store, user string) string { return s.redis.Prefix() + "mh:{" + user + "}" }

// PutMentions stands in for the mention kind's writes (pkg/kinds/mentions,
// which the driver's tests may not import), so the unread view has
// mentions to count: it sets each key's stored list to the newest cap+1
// of its seqs, as the kind keeps them (a set, not a union with what is
// stored).
func PutMentions(tb testing.TB, s Store, mentionCap int, ms ...channel.Mentions) {
	tb.Helper()
	ctx := context.Background()
	_, err := s.redis.Client().Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, m := range ms {
			kept := channel.MergeMentions(nil, m.Seqs, mentionCap)
			padded := make([]string, len(kept))
			for i, q := range kept {
				padded[i] = redisstore.PadSeq(q)
			}
			pipe.HSet(ctx, mentionsKey(s, m.Key.User), m.Key.Channel, strings.Join(padded, " "))
		}
		return nil
	})
	require.NoError(tb, err)
}

// membersKeys are the membership kind's keys of a user and a channel
// (members.Store.UserMembersKey, ChannelMembersKey), which the driver's
// tests may not import.
func membersKeys(s Store, user, ch string) (string, string) {
	return s.redis.Prefix() + "um:{" + user + "}", s.redis.Prefix() + "cm:{" + ch + "}"
}

// PutMemberships stands in for the membership kind's writes
// (pkg/kinds/members, which the driver's tests may not import), so the
// unread view and the memory measure have registers: it sets each
// register in the user's and the channel's hash, in the kind's layout
// ("M VERSION_SEQ VERSION_MS JOIN_SEQ", base 62), without merging or
// counting.
func PutMemberships(tb testing.TB, s Store, regs ...channel.Membership) {
	tb.Helper()
	ctx := context.Background()
	_, err := s.redis.Client().Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, m := range regs {
			v := []byte{'0', ' '}
			if m.Member {
				v[0] = '1'
			}
			v = append(redisstore.AppendB62(v, m.VersionSeq), ' ')
			v = append(redisstore.AppendB62(v, m.VersionUnixMs), ' ')
			v = redisstore.AppendB62(v, m.JoinSeq)
			um, cm := membersKeys(s, m.Key.User, m.Key.Channel)
			pipe.HSet(ctx, um, m.Key.Channel, string(v))
			pipe.HSet(ctx, cm, m.Key.User, string(v))
		}
		return nil
	})
	require.NoError(tb, err)
}

// PutHeads writes channel values holding heads (the deletion count and
// group mention top unknown) as pkg/kinds/heads' script would, for tests
// of this package, which may not import a kind.
func PutHeads(tb testing.TB, s Store, heads ...channel.Head) {
	tb.Helper()
	ctx := context.Background()
	_, err := s.redis.Client().Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, h := range heads {
			v, err := redisstore.EncodeHead(h)
			require.NoError(tb, err)
			pipe.Set(ctx, s.redis.Prefix()+"hd:{"+h.Channel+"}", v+" - -", 0)
		}
		return nil
	})
	require.NoError(tb, err)
}

// eraseUser is the erasure of user by the driver with the kind's hash
// (kind.ErasedHashes of the cursors alone).
func eraseUser(ctx context.Context, s Store, user string, nowMs int64) (tombstone.Tombstone, error) {
	return s.redis.Erase(ctx, user, nowMs, 0, ErasedHashes(s.redis, user), nil)
}

// ErasedHashes is the cursors' part of an erasure of user's hashes
// (kind.ErasedHashes of the kind alone).
func ErasedHashes(rs *redisstore.Store, user string) []redisstore.ErasedHash {
	return kind.ErasedHashes([]kind.Kind{Kind}, &kind.Env{Redis: rs}, user)
}
