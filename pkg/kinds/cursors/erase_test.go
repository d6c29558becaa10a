package cursors_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/tombstone"
	"github.com/readstate/receipts/pkg/views/readby"
)

// seedRedisUser gives user cursors and the read-by view's traces in two
// channels (one with a glob character in its name); the kinds' hashes
// (the membership registers among them) are theirs to seed (their
// folders test their part of an erasure).
func seedRedisUser(t *testing.T, s *redisstore.Store, user string) {
	t.Helper()
	ctx := context.Background()
	for _, ch := range []string{"c1", "c*2"} {
		k := receipt.Key{User: user, Channel: ch}
		res, err := cursors.NewStore(s).Merge(ctx, []receipt.State{{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 5}}, UpdatedAtUnixMs: 1}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		_, err = readby.NewStore(nil, s).Apply(ctx, []readby.Move{
			{Channel: ch, User: user, Side: readby.Read, Position: receipt.Position{Seq: 5}, AtUnixMs: 1},
			{Channel: ch, User: user, Side: readby.Delivered, Position: receipt.Position{Seq: 5}, AtUnixMs: 1},
		}, 100)
		require.NoError(t, err)
	}
}

// viewTraces counts user's fields and members in a channel's view and
// the user's moves in its stream.
func viewTraces(t *testing.T, s *redisstore.Store, ch, user string) int {
	t.Helper()
	ctx := context.Background()
	rdb := s.Client()
	n := 0
	for _, f := range []string{"r:" + user, "d:" + user} {
		ok, err := rdb.HExists(ctx, readby.NewStore(nil, s).CurKey(ch), f).Result()
		require.NoError(t, err)
		if ok {
			n++
		}
	}
	for _, k := range []readby.Side{readby.Read, readby.Delivered} {
		if err := rdb.ZScore(ctx, readby.NewStore(nil, s).ZSetKey(ch, k), user).Err(); err == nil {
			n++
		}
	}
	entries, err := rdb.XRange(ctx, readby.NewStore(nil, s).StreamKey(ch), "-", "+").Result()
	require.NoError(t, err)
	for _, e := range entries {
		// A removal entry (no position) tells watchers to forget the
		// user; only moves are traces.
		if e.Values["u"] == user && e.Values["rm"] == nil {
			n++
		}
	}
	return n
}

// checkErased asserts that Redis holds nothing of user but the tombstone
// and the empty, complete hashes.
func checkErased(t *testing.T, s *redisstore.Store, user string) {
	t.Helper()
	ctx := context.Background()
	states, complete, err := cursors.NewStore(s).Get(ctx, user, nil)
	require.NoError(t, err)
	require.Empty(t, states)
	require.True(t, complete, "an erased user's hash is complete, so reads do not fall back to Postgres")
	for _, ch := range []string{"c1", "c*2"} {
		require.Zero(t, viewTraces(t, s, ch, user), "channel %s view", ch)
	}
}

func TestEraseRemovesTheUserAndStampsLaterMarks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, s.Load(ctx))
	seedRedisUser(t, s, "gone")
	seedRedisUser(t, s, "kept")
	seedRedisUser(t, s, "gone*") // a glob in the id: its keys are not "gone"'s
	k := receipt.Key{User: "gone", Channel: "c1"}
	before, err := cursors.NewStore(s).Merge(ctx, []receipt.State{{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 6}}}})
	require.NoError(t, err)
	require.Equal(t, redisstore.GenerationUnknown, before[0].Generation, "no tombstone hash: unknown (never erased, or lost)")
	// Once the gateway remembers what Postgres says (never erased), "0".
	require.NoError(t, s.RememberTombstones(ctx, []string{"gone"}, nil))
	before, err = cursors.NewStore(s).Merge(ctx, []receipt.State{{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 6}}}})
	require.NoError(t, err)
	require.Zero(t, before[0].Generation, "known never erased")

	// A kind's hashes of the user (a kind that owns its layout names
	// them): one left empty and complete, as the store's own, one deleted,
	// one left complete keeping a counter at "0" whose fields name the
	// channels to clean (as the membership hash).
	kindHash, deletedHash, countedHash := s.Prefix()+"kh:{gone}", s.Prefix()+"kd:{gone}", s.Prefix()+"kc:{gone}"
	require.NoError(t, rdb.HSet(ctx, kindHash, "c1", "v").Err())
	require.NoError(t, rdb.HSet(ctx, deletedHash, "s", "v").Err())
	require.NoError(t, rdb.HSet(ctx, countedHash, "c3", "v", ":c", "1").Err())
	var cleaned []string
	redact := func(ctx context.Context, user, ch string) error {
		cleaned = append(cleaned, ch)
		return nil
	}
	ts, err := s.Erase(ctx, "gone", 1_000, 0, append(cursors.ErasedHashes(s, "gone"), redisstore.ErasedHash{Key: kindHash, Complete: true}, redisstore.ErasedHash{Key: deletedHash}, redisstore.ErasedHash{Key: countedHash, Complete: true, Channels: true, Counters: []string{":c"}}), readby.NewStore(nil, s).Redact(1_000, redact))
	require.NoError(t, err)
	require.Equal(t, tombstone.Tombstone{User: "gone", Generation: 1_000, ErasedAtUnixMs: 1_000}, ts)
	checkErased(t, s, "gone")
	held, err := rdb.HGetAll(ctx, kindHash).Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{redisstore.LoadedField: "1"}, held, "the kind's hash: empty and complete")
	require.Zero(t, rdb.Exists(ctx, deletedHash).Val(), "the kind's hash deleted")
	held, err = rdb.HGetAll(ctx, countedHash).Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{redisstore.LoadedField: "1", ":c": "0"}, held, "the counted hash: empty, complete, counting none")
	require.ElementsMatch(t, []string{"c1", "c*2", "c3"}, cleaned, "the cursors' channels and those the counted hash named")
	for _, other := range []string{"kept", "gone*"} {
		states, _, err := cursors.NewStore(s).Get(ctx, other, nil)
		require.NoError(t, err)
		require.Len(t, states, 2, other)
		require.Equal(t, 6, viewTraces(t, s, "c1", other), other)
	}
	got, err := s.Tombstone(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, ts, got)

	// Marks after the erasure read its generation in their script, in
	// both merge flavours; the user comes back.
	after, err := cursors.NewStore(s).MergeMarks(ctx, []receipt.State{{Key: k, Read: receipt.Cursor{Position: receipt.Position{Epoch: receipt.EpochCurrent, Seq: 2}}}})
	require.NoError(t, err)
	require.NoError(t, after[0].Err)
	require.Equal(t, ts.Generation, after[0].Generation)
	require.True(t, after[0].Advanced, "the user starts over")
	plain, err := cursors.NewStore(s).Merge(ctx, []receipt.State{{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 1}}}})
	require.NoError(t, err)
	require.Equal(t, ts.Generation, plain[0].Generation)

	// A second erasure in the same millisecond still moves the generation.
	again, err := s.Erase(ctx, "gone", 1_000, 0, cursors.ErasedHashes(s, "gone"), readby.NewStore(nil, s).Redact(1_000, nil))
	require.NoError(t, err)
	require.Equal(t, int64(1_001), again.Generation)
	checkErased(t, s, "gone")

	set, err := s.Tombstones(ctx, []string{"gone", "kept"})
	require.NoError(t, err)
	require.Equal(t, tombstone.Set{"gone": again}, set)
}

func TestClusterErase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	cfg := redisstore.ClientConfig{Mode: redisstore.ModeCluster, Addrs: c.Addrs[:1], Prefix: "receipts:"}
	s := openStore(t, cfg)
	seedRedisUser(t, s, "gone")
	seedRedisUser(t, s, "kept")
	ts, err := s.Erase(ctx, "gone", 5, 0, cursors.ErasedHashes(s, "gone"), readby.NewStore(nil, s).Redact(5, nil))
	require.NoError(t, err)
	require.Equal(t, int64(5), ts.Generation)
	checkErased(t, s, "gone")
	states, _, err := cursors.NewStore(s).Get(ctx, "kept", nil)
	require.NoError(t, err)
	require.Len(t, states, 2)
}
