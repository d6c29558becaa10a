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
	"github.com/readstate/receipts/pkg/kinds/mentions"
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
	f := strings.Fields(rdb.Get(context.Background(), rs.HeadKey(ch)).Val())
	if len(f) < 5 || f[4] == "-" {
		return ""
	}
	return f[4]
}

// A channel's group mentions count in the unread read for every user but
// their sender, with the user's own mentions once each, above the read
// and capped; unknown (never hydrated, or the set lost) they are
// reported missing, in the one pipeline read and the chunked one alike.
func TestUnreadCountsGroupMentions(t *testing.T) {
	t.Parallel()
	for name, chunk := range map[string]int{"one pipeline": redisstore.UnreadChunkDefault, "chunked": 1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gm, s, rdb := newRedisStore(t)
			s.SetUnreadChunk(chunk)
			ctx := context.Background()
			_, err := s.RaiseHeads(ctx, []channel.Head{{Channel: "c", Seq: 10, UpdatedAtUnixMs: 1}, {Channel: "d", Seq: 4, UpdatedAtUnixMs: 1}})
			require.NoError(t, err)
			for _, ch := range []string{"c", "d"} {
				st := receipt.State{Key: receipt.Key{User: "u", Channel: ch}, Read: receipt.Cursor{Position: receipt.Position{Seq: 2}}, UpdatedAtUnixMs: 1}
				require.NoError(t, s.Hydrate(ctx, "u", []receipt.State{st}, redisstore.Incarnation{}))
				_, err = s.Merge(ctx, []receipt.State{st})
				require.NoError(t, err)
			}
			require.NoError(t, mentions.NewStore(nil, s).HydrateRedis(ctx, "u", []channel.Mentions{{Key: receipt.Key{User: "u", Channel: "c"}, Seqs: []int64{3, 5}}}, 2))
			require.NoError(t, s.HydrateMemberships(ctx, "u", nil))
			gms := []channel.GroupMention{{Seq: 1, Sender: "v"}, {Seq: 4, Sender: "v"}, {Seq: 5, Sender: "x"}, {Seq: 6, Sender: "u"}, {Seq: 7}}
			require.NoError(t, gm.AddRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: gms}}, 100))

			read := func(mentionCap int, channels ...string) (redisstore.UnreadView, map[string]redisstore.ChannelView) {
				t.Helper()
				var v redisstore.UnreadView
				var err error
				if len(channels) == 0 {
					v, err = s.UnreadPage(ctx, "u", redisstore.Page{}, mentionCap)
				} else {
					v, err = s.Unread(ctx, "u", channels, mentionCap)
				}
				require.NoError(t, err)
				out := map[string]redisstore.ChannelView{}
				for _, cv := range v.Channels {
					out[cv.Channel] = cv
				}
				return v, out
			}
			v, _ := read(100)
			require.ElementsMatch(t, []string{"c", "d"}, v.MissingGroupMentions, "a write does not make a channel known")

			require.NoError(t, gm.HydrateRedis(ctx, []channel.GroupMentions{{Channel: "c"}, {Channel: "d"}}, 100))
			for _, listed := range [][]string{nil, {"c", "d"}} {
				v, byCh := read(100, listed...)
				require.Empty(t, v.MissingGroupMentions)
				c := byCh["c"]
				n, capped := c.MentionsAt(false)
				require.Equal(t, int64(2), n, "3 and 5, named")
				require.False(t, capped)
				n, _ = c.MentionsAt(true)
				require.Equal(t, int64(4), n, "3, 4, 5 (named and group) and 7; 1 is read, 6 is the user's own")
				d := byCh["d"]
				n, _ = d.MentionsAt(true)
				require.Zero(t, n, "a channel without group mentions")
			}
			_, byCh := read(2, "c")
			c := byCh["c"]
			n, capped := c.MentionsAt(true)
			require.Equal(t, int64(3), n, "cap+1")
			require.True(t, capped)

			// The set lost, its top still in the channel's hash: missing.
			require.NoError(t, rdb.Del(ctx, gm.RedisKey("c")).Err())
			v, _ = read(100, "c")
			require.Equal(t, []string{"c"}, v.MissingGroupMentions)
			require.NoError(t, gm.HydrateRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: gms[2:]}}, 100))
			v, byCh = read(100, "c")
			require.Empty(t, v.MissingGroupMentions)
			c = byCh["c"]
			n, _ = c.MentionsAt(true)
			require.Equal(t, int64(3), n, "3, 5 and 7 once hydrated again")
		})
	}
}

// The Redis merge keeps the newest cap+1 seqs, one member per seq (its
// least sender), and raises the channel's top only once it is known.
func TestGroupMentionsMergeInRedis(t *testing.T) {
	t.Parallel()
	s, rs, rdb := newRedisStore(t)
	ctx := context.Background()
	add := func(ms ...channel.GroupMention) {
		t.Helper()
		require.NoError(t, s.AddRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: ms}}, 2))
	}
	add(channel.GroupMention{Seq: 2, Sender: "b"}, channel.GroupMention{Seq: 1, Sender: "a"})
	add(channel.GroupMention{Seq: 2, Sender: "B"}, channel.GroupMention{Seq: 2, Sender: "c"})
	require.Empty(t, top(t, rdb, rs, "c"), "not known before a hydrate")
	require.NoError(t, s.HydrateRedis(ctx, []channel.GroupMentions{{Channel: "c"}}, 2))
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
	_, err := rs.Merge(ctx, []receipt.State{st})
	require.NoError(t, err)
	require.NoError(t, s.AddRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: []channel.GroupMention{{Seq: 7, Sender: "gone"}, {Seq: 8, Sender: "other"}}}}, 10))
	env := &kind.Env{Redis: rs}
	_, err = rs.Erase(ctx, "gone", 1_000, 0, kind.ErasedHashes([]kind.Kind{Kind}, env, "gone"), kind.RedisRedact([]kind.Kind{Kind}, env))
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
	require.NoError(t, s.AddRedis(ctx, []channel.GroupMentions{{Channel: "c", Mentions: []channel.GroupMention{{Seq: 1, Sender: "a"}}}}, 3))
	got, err := s.ReadRedis(ctx, []string{"c"})
	require.NoError(t, err)
	require.Equal(t, []channel.GroupMention{{Seq: 1, Sender: "a"}}, got[0].Mentions)
}
