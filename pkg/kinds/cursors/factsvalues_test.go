package cursors

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// checksAndValues queues, as the gateway's checks do (pkg/gate/seam's
// factsAndValues, which add the membership kind's reads), the keys'
// stored values (QueueMarkValues) and then the heads of their channels
// in one pipeline, and returns the values and the heads known.
func checksAndValues(ctx context.Context, s Store, keys []receipt.Key) (map[string]bool, *MarkValues, error) {
	var chs []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k.Channel] {
			seen[k.Channel] = true
			chs = append(chs, k.Channel)
		}
	}
	var read func() *MarkValues
	var heads *redisstore.MGet
	headKeys := make([]string, len(chs))
	for i, ch := range chs {
		headKeys[i] = s.redis.Prefix() + "hd:{" + ch + "}" // the heads kind's channel value
	}
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		read = s.QueueMarkValues(ctx, pipe, keys)
		heads = s.redis.QueueMGet(ctx, pipe, headKeys)
	}); err != nil {
		return nil, nil, err
	}
	known := make(map[string]bool, len(chs))
	for i, ch := range chs {
		v, err := heads.Value(i)
		if err != nil {
			return nil, nil, err
		}
		known[ch] = v != nil
	}
	return known, read(), nil
}

func keysOf(marks []receipt.State) []receipt.Key {
	keys := make([]receipt.Key, len(marks))
	for i, m := range marks {
		keys[i] = m.Key
	}
	return keys
}

// A write's checks and its merge's reads share one round trip: merging
// from the values read with them
// answers and stores exactly what MergeMarks does (random calls with
// repeated keys, current and explicit epochs, stale marks), and checks
// and merge together take the round trips of MergeMarks alone.
func TestMergeMarksFromTheChecksReadMatchesMergeMarks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	trips := &CmdLog{}
	rdb.AddHook(trips)
	shared := NewStore(redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)}))
	alone := NewStore(redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)}))
	require.NoError(t, shared.redis.Load(ctx))
	Restored(t, shared, "u0", "u1", "u2", "u3")
	Restored(t, alone, "u0", "u1", "u2", "u3")
	for _, s := range []Store{shared, alone} {
		v, err := redisstore.EncodeHead(channel.Head{Channel: "c0", Seq: 30, MessageID: "m30", UpdatedAtUnixMs: 1})
		require.NoError(t, err)
		// The heads kind's value, in a pipeline as its script's write is.
		_, err = s.redis.Exec(ctx, func(pipe redis.Pipeliner) { pipe.Set(ctx, s.redis.Prefix()+"hd:{c0}", v+" - -", 0) })
		require.NoError(t, err)
	}
	rng := rand.New(rand.NewPCG(5, 9))
	const users, channels = 4, 3
	for round := range 200 {
		marks := make([]receipt.State, 1+rng.IntN(12))
		for i := range marks {
			marks[i] = randomMark(rng, users, channels)
		}
		// Alone: MergeMarks' read and compare-and-set.
		before := trips.Trips()
		want, err := alone.MergeMarks(ctx, marks)
		require.NoError(t, err)
		mergeTrips := trips.Trips() - before

		before = trips.Trips()
		_, vals, err := checksAndValues(ctx, shared, keysOf(marks))
		require.NoError(t, err)
		require.Equal(t, int64(1), trips.Trips()-before, "checks and values in one round trip")
		got, err := shared.MergeMarksFrom(ctx, vals, marks)
		require.NoError(t, err)
		requireSameResults(t, round, marks, want, got)
		require.Equal(t, mergeTrips, trips.Trips()-before,
			"round %d: the checks and the merge take the round trips of the merge alone (its read is the checks')", round)
	}
	requireSameUsers(t, rdb, alone, shared, users)
}

// A key another writer moves between the checks' read and the merge: the
// compare-and-set finds it moved, and the merge is redone from what it
// holds, so nothing the other writer stored is lost. A key the read did
// not cover is read by the merge.
func TestMergeMarksFromAStaleReadLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	Restored(t, s, "race")
	k := receipt.Key{User: "race", Channel: "c"}
	read := func(seq int64) receipt.State {
		return receipt.State{Key: k, Read: cur(receipt.EpochCurrent, seq, "m"+strconv.FormatInt(seq, 10)), DeviceID: "d", UpdatedAtUnixMs: 10}
	}
	_, err := s.MergeMarks(ctx, []receipt.State{read(4)})
	require.NoError(t, err)
	_, vals, err := checksAndValues(ctx, s, []receipt.Key{k})
	require.NoError(t, err)
	require.Len(t, vals.read, 1)

	// Another writer moves the key to 9 after the read.
	_, err = NewStore(redisstore.New(s.redis.Client(), redisstore.Config{Prefix: s.redis.Prefix()})).MergeMarks(ctx, []receipt.State{read(9)})
	require.NoError(t, err)
	other := receipt.Key{User: "race", Channel: "unread-before"}
	res, err := s.MergeMarksFrom(ctx, vals, []receipt.State{read(6), read(12), {Key: other, Delivered: cur(0, 3, "m3"), DeviceID: "d", UpdatedAtUnixMs: 10}})
	require.NoError(t, err)
	require.False(t, res[0].Advanced, "6 is behind the 9 the other writer stored")
	require.Equal(t, int64(9), res[0].State.Read.Position.Seq)
	require.True(t, res[1].Advanced)
	require.True(t, res[2].Advanced)
	states, _, err := s.Get(ctx, "race", []string{"c", "unread-before"})
	require.NoError(t, err)
	require.Equal(t, int64(12), states[0].Read.Position.Seq)
	require.Equal(t, int64(3), states[1].Delivered.Position.Seq)
}

// After Redis lost its scripts, the shared read reloads them and still
// returns every value (the scripts come first in the pipeline, so the
// script error is the one exec sees, not a missing head's nil).
func TestMarkValuesReloadScriptsAfterScriptFlush(t *testing.T) {
	// Not parallel: the flush is server-wide, and the package's parallel
	// tests count round trips that a reload would add to.
	ctx := context.Background()
	s, _ := newTestStore(t)
	keys := []receipt.Key{{User: "u1", Channel: "no-head"}, {User: "u2", Channel: "no-head"}}
	Restored(t, s, "u1", "u2")
	_, err := s.MergeMarks(ctx, []receipt.State{{Key: keys[0], Delivered: cur(0, 7, "m7"), DeviceID: "d", UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	require.NoError(t, s.redis.Client().ScriptFlush(ctx).Err())
	known, vals, err := checksAndValues(ctx, s, keys)
	require.NoError(t, err)
	require.False(t, known["no-head"])
	require.Len(t, vals.read, 2)
	require.NotEmpty(t, vals.read[keys[0]].cur)
	require.Empty(t, vals.read[keys[1]].cur)
}
