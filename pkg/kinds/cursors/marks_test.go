package cursors

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// randomMark is a mark of the kinds the gateway sends: reads without an
// epoch or with one (some stale), private reads, deliveries, with message
// ids and devices, over a few keys so that calls repeat keys.
func randomMark(rng *rand.Rand, users, channels int) receipt.State {
	k := receipt.Key{User: "u" + strconv.Itoa(rng.IntN(users)), Channel: "c" + strconv.Itoa(rng.IntN(channels))}
	seq := 1 + rng.Int64N(40)
	c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}
	epoch := receipt.EpochCurrent
	if rng.IntN(4) == 0 {
		epoch = rng.Int64N(3)
	}
	st := receipt.State{Key: k, DeviceID: "d" + strconv.Itoa(rng.IntN(3)), UpdatedAtUnixMs: 1_000 + rng.Int64N(1_000)}
	switch rng.IntN(5) {
	case 0: // delivered
		st.Delivered = c
	case 1: // private read
		st.PrivateRead = receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: seq}}
	default: // read (delivered is raised by the merge)
		c.Position.Epoch = epoch
		st.Read = c
	}
	return st
}

// The two-phase merge (read, merge in Go, CAS) answers exactly what the
// merge script answers, mark by mark, and leaves the same bytes in Redis:
// random calls with repeated keys, explicit and current epochs, stale
// marks, private reads, mark-unread and an erasure in between.
func TestMergeMarksMatchesTheScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	cas := NewStore(redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)}))
	script := NewStore(redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)}))
	require.NoError(t, cas.redis.Load(ctx))
	Restored(t, cas, "u0", "u1", "u2", "u3")
	Restored(t, script, "u0", "u1", "u2", "u3")
	rng := rand.New(rand.NewPCG(7, 11))
	const users, channels = 4, 3
	for round := range 300 {
		switch {
		case round%37 == 36:
			k := receipt.Key{User: "u" + strconv.Itoa(rng.IntN(users)), Channel: "c" + strconv.Itoa(rng.IntN(channels))}
			seq := 1 + rng.Int64N(20)
			seen := receipt.EpochCurrent
			if rng.IntN(2) == 0 {
				seen = rng.Int64N(3)
			}
			a, errA := cas.MarkUnread(ctx, k, seq, seen, "dx", 5_000)
			b, errB := script.MarkUnread(ctx, k, seq, seen, "dx", 5_000)
			require.NoError(t, errA)
			require.NoError(t, errB)
			require.Equal(t, b, a)
			continue
		case round == 150:
			_, err := eraseUser(ctx, cas, "u1", 9_000)
			require.NoError(t, err)
			_, err = eraseUser(ctx, script, "u1", 9_000)
			require.NoError(t, err)
			continue
		}
		marks := make([]receipt.State, 1+rng.IntN(12))
		for i := range marks {
			marks[i] = randomMark(rng, users, channels)
		}
		got, err := cas.MergeMarks(ctx, marks)
		require.NoError(t, err)
		want, err := script.mergeMarksScript(ctx, marks)
		require.NoError(t, err)
		requireSameResults(t, round, marks, want, got)
	}
	requireSameUsers(t, rdb, script, cas, users)
}

// requireSameResults requires got to answer each mark as want does.
func requireSameResults(t *testing.T, round int, marks []receipt.State, want, got []MergeResult) {
	t.Helper()
	for i := range marks {
		require.NoError(t, got[i].Err, "round %d mark %d", round, i)
		require.Equal(t, want[i], got[i], "round %d mark %d: %+v", round, i, marks[i])
	}
}

// requireSameUsers requires got to hold the same hashes as want for the
// users u0 … u(users-1).
func requireSameUsers(t *testing.T, rdb redis.UniversalClient, want, got Store, users int) {
	t.Helper()
	ctx := context.Background()
	for u := range users {
		user := "u" + strconv.Itoa(u)
		a, err := rdb.HGetAll(ctx, got.RedisKey(user)).Result()
		require.NoError(t, err)
		b, err := rdb.HGetAll(ctx, want.RedisKey(user)).Result()
		require.NoError(t, err)
		require.Equal(t, b, a, user)
	}
}

// Concurrent calls on the same few keys: CASes that find the value
// changed merge again, and the stored state ends as the max-merge of every
// mark whatever the interleaving.
func TestMergeMarksUnderContention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	Restored(t, s, "u0", "u1")
	const workers, calls, seedEpoch = 8, 40, 2
	seeded := map[receipt.Key]receipt.State{}
	for u := range 2 {
		for c := range 2 {
			k := receipt.Key{User: "u" + strconv.Itoa(u), Channel: "c" + strconv.Itoa(c)}
			seeded[k] = receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Epoch: seedEpoch}}}
			_, err := s.Merge(ctx, []receipt.State{seeded[k]})
			require.NoError(t, err)
		}
	}
	all := make([][]receipt.State, workers)
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), 3))
		for range calls {
			marks := make([]receipt.State, 20)
			for i := range marks {
				// Resolved epochs only, all the seeded one (neither stale
				// nor ahead): the final state is then the max-merge of
				// all of them in any order.
				m := randomMark(rng, 2, 2)
				if !m.Read.Position.IsZero() {
					m.Read.Position.Epoch = seedEpoch
				}
				if !m.PrivateRead.Position.IsZero() {
					m.PrivateRead.Position.Epoch = seedEpoch
				}
				marks[i] = m
			}
			all[w] = append(all[w], marks...)
		}
	}
	for w := range workers {
		wg.Go(func() {
			for c := range calls {
				res, err := s.MergeMarks(ctx, all[w][c*20:(c+1)*20])
				if !assertNoMergeError(t, res, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	want := map[receipt.Key]receipt.State{}
	for _, marks := range all {
		for _, m := range marks {
			st, ok := want[m.Key]
			if !ok {
				st = seeded[m.Key]
			}
			want[m.Key], _ = receipt.Merge(st, m)
		}
	}
	for k, w := range want {
		states, _, err := s.Get(ctx, k.User, []string{k.Channel})
		require.NoError(t, err)
		require.Len(t, states, 1)
		require.True(t, w.SameCursors(states[0]), "%s: got %+v, want %+v", k.KafkaKey(), states[0], w)
	}
}

func assertNoMergeError(t *testing.T, res []MergeResult, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	for _, r := range res {
		if r.Err != nil {
			t.Error(r.Err)
			return false
		}
	}
	return true
}

// A key another writer moves between the read and the CAS: the CAS fails,
// the marks are merged again from the value it found, and the answers say
// what the key holds; when it keeps moving, the merge script takes over.
func TestMergeMarksRetriesAMovedKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	Restored(t, s, "race")
	k := receipt.Key{User: "race", Channel: "c"}
	read := func(seq int64) receipt.State {
		c := cur(receipt.EpochCurrent, seq, "m"+strconv.FormatInt(seq, 10))
		return receipt.State{Key: k, Read: c, DeviceID: "d", UpdatedAtUnixMs: 10}
	}
	other := NewStore(redisstore.New(s.redis.Client(), redisstore.Config{Prefix: s.redis.Prefix()}))
	moves := 0
	s.beforeCAS = func(attempt int) {
		if attempt == 0 {
			moves++
			res, err := other.MergeMarks(ctx, []receipt.State{read(int64(5 + moves))})
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
		}
	}
	// The other writer moves the key to 6, past the first mark (4) and
	// below the second (8): the first is a no-op on 6, the second wins.
	res, err := s.MergeMarks(ctx, []receipt.State{read(4), read(8)})
	require.NoError(t, err)
	require.Equal(t, 1, moves)
	require.False(t, res[0].Advanced, "4 is behind the 6 the other writer stored")
	require.Equal(t, int64(6), res[0].State.Read.Position.Seq)
	require.True(t, res[1].Advanced)
	require.Equal(t, int64(8), res[1].State.Read.Position.Seq)
	states, _, err := s.Get(ctx, "race", []string{"c"})
	require.NoError(t, err)
	require.Equal(t, res[1].State, states[0])

	// A writer that moves the key before every CAS: after the attempts,
	// the script merges atomically.
	s.beforeCAS = func(int) {
		moves++
		_, err := other.MergeMarks(ctx, []receipt.State{read(int64(100 + moves))})
		require.NoError(t, err)
	}
	res, err = s.MergeMarks(ctx, []receipt.State{read(500)})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Advanced)
	require.Equal(t, int64(500), res[0].State.Read.Position.Seq)
	require.Equal(t, 1+casAttempts, moves)
}

// Marks that change nothing (a replayed or stale flush) are answered from
// the read: no CAS, and no merge script for any of them.
func TestMergeMarksOfNothingNewRunsNoScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	Restored(t, s, "u0", "u1", "u2", "u3", "u4", "u5", "u6")
	scripted := 0
	s.onScripted = func(n int) { scripted += n }
	cas := 0
	s.beforeCAS = func(int) { cas++ }
	var marks []receipt.State
	for i := range 50 {
		k := receipt.Key{User: "u" + strconv.Itoa(i%7), Channel: "c" + strconv.Itoa(i)}
		marks = append(marks, receipt.State{Key: k, Read: cur(receipt.EpochCurrent, int64(10+i), "m"), DeviceID: "d", UpdatedAtUnixMs: 10})
	}
	first, err := s.MergeMarks(ctx, marks)
	require.NoError(t, err)
	require.Equal(t, 1, cas, "one CAS round writes them")

	stale := slices.Clone(marks)
	for i := range stale {
		stale[i].Read.Position.Seq -= 5
	}
	for _, again := range [][]receipt.State{marks, stale} {
		res, err := s.MergeMarks(ctx, again)
		require.NoError(t, err)
		for i, r := range res {
			require.NoError(t, r.Err)
			require.False(t, r.Advanced, i)
			require.Equal(t, first[i].State, r.State, i)
		}
	}
	require.Equal(t, 1, cas, "nothing to write: no CAS")
	require.Zero(t, scripted, "and no merge script")
}

// Every mark is stamped with its user's erasure generation, whichever of
// its call's keys needed a second CAS round.
func TestMergeMarksStampsTheGenerationAfterARetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	ts, err := eraseUser(ctx, s, "gen", 1_000)
	require.NoError(t, err)
	require.NotZero(t, ts.Generation)
	mark := func(ch string, seq int64) receipt.State {
		return receipt.State{Key: receipt.Key{User: "gen", Channel: ch}, Read: cur(receipt.EpochCurrent, seq, "m"), DeviceID: "d", UpdatedAtUnixMs: 2_000}
	}
	other := NewStore(redisstore.New(s.redis.Client(), redisstore.Config{Prefix: s.redis.Prefix()}))
	s.beforeCAS = func(attempt int) {
		if attempt == 0 { // the second key moves under the first CAS
			_, err := other.MergeMarks(ctx, []receipt.State{mark("b", 3)})
			require.NoError(t, err)
		}
	}
	res, err := s.MergeMarks(ctx, []receipt.State{mark("a", 5), mark("b", 5), mark("c", 5)})
	require.NoError(t, err)
	for i, r := range res {
		require.NoError(t, r.Err)
		require.True(t, r.Advanced, i)
		require.Equal(t, ts.Generation, r.Generation, "mark %d", i)
	}
}
