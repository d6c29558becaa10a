package groupmentions

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// newRedisStore is the kind's store on a Redis of the test's own prefix
// (no Postgres), that driver and its client.
func newRedisStore(t *testing.T) (Store, *redisstore.Store, redis.UniversalClient) {
	t.Helper()
	rs := kindtest.Redis(t, Scripts...)
	return NewStore(nil, rs), rs, rs.Client()
}

// top is the fifth part of a channel's value: its greatest kept group
// mention seq, padded ("" while not known).
func top(t *testing.T, rdb redis.UniversalClient, rs *redisstore.Store, ch string) string {
	t.Helper()
	f := strings.Fields(rdb.Get(context.Background(), headkind.NewStore(nil, rs).RedisKey(ch)).Val())
	if len(f) < 5 || f[4] == "-" {
		return ""
	}
	return f[4]
}

// The Redis merge keeps the newest cap+1 seqs, one member per seq (its
// least sender), and raises the channel's top only once it is known.
func TestGroupMentionsMergeInRedis(t *testing.T) {
	t.Parallel()
	s, rs, rdb := newRedisStore(t)
	s = s.WithMentionCap(2)
	ctx := context.Background()
	add := func(ms ...channel.GroupMention) {
		t.Helper()
		require.NoError(t, s.AddRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: ms}}))
	}
	add(channel.GroupMention{Seq: 2, Sender: "b"}, channel.GroupMention{Seq: 1, Sender: "a"})
	add(channel.GroupMention{Seq: 2, Sender: "B"}, channel.GroupMention{Seq: 2, Sender: "c"})
	require.Empty(t, top(t, rdb, rs, "c"), "not known before a hydrate")
	require.NoError(t, s.HydrateRedis(ctx, []channel.GroupMentions{{Channel: "c"}}))
	add(channel.GroupMention{Seq: 5}, channel.GroupMention{Seq: 3, Sender: "z"})
	got, err := s.ReadRedis(ctx, []string{"c", "none"})
	require.NoError(t, err)
	require.Equal(t, []channel.GroupMention{{Seq: 2, Sender: "B"}, {Seq: 3, Sender: "z"}, {Seq: 5}}, got[0].Mentions)
	require.Nil(t, got[1])
	require.Equal(t, redisstore.PadSeq(5), top(t, rdb, rs, "c"))
}

// An erasure keeps the user's group mentions in the channels they had
// state in with no sender (the kind's RedisRedact, run by the driver's
// erasure); another sender's stay.
func TestErasureRedactsTheSenderInRedis(t *testing.T) {
	t.Parallel()
	s, rs, _ := newRedisStore(t)
	ctx := context.Background()
	st := receipt.State{Key: receipt.Key{User: "gone", Channel: "c"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 2}}, UpdatedAtUnixMs: 1}
	_, err := cursors.NewStore(rs).Merge(ctx, []receipt.State{st})
	require.NoError(t, err)
	require.NoError(t, s.AddRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: []channel.GroupMention{{Seq: 7, Sender: "gone"}, {Seq: 8, Sender: "other"}}}}))
	env := &kind.Env{Redis: rs}
	_, err = rs.Erase(ctx, "gone", 1_000, 0, kind.ErasedHashes([]kind.Kind{cursors.Kind, Kind}, env, "gone"), kind.RedisRedact([]kind.Kind{Kind}, env))
	require.NoError(t, err)
	got, err := s.ReadRedis(ctx, []string{"c"})
	require.NoError(t, err)
	require.Equal(t, []channel.GroupMention{{Seq: 7}, {Seq: 8, Sender: "other"}}, got[0].Mentions)
}

// After Redis lost its script cache (SCRIPT FLUSH; a restart does the
// same) a merge still succeeds: Exec loads the kind's scripts again and
// runs the pipeline once more, whose answers are the ones read.
func TestMergeReloadsScriptsAfterScriptFlush(t *testing.T) {
	// Not parallel: the flush is server-wide (every user of a script
	// reloads it on NOSCRIPT).
	s, _, rdb := newRedisStore(t)
	ctx := context.Background()
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	require.NoError(t, s.AddRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: []channel.GroupMention{{Seq: 1, Sender: "a"}}}}))
	got, err := s.ReadRedis(ctx, []string{"c"})
	require.NoError(t, err)
	require.Equal(t, []channel.GroupMention{{Seq: 1, Sender: "a"}}, got[0].Mentions)
}
