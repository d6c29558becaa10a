package threads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// newThreadStore is the kinds' store on a Redis of the test's own prefix
// (no Postgres).
func newThreadStore(t testing.TB) Store {
	t.Helper()
	return NewStore(nil, kindtest.Redis(t, Scripts...))
}

// restored marks users' cursor and thread hashes restored, as the
// gateway's restore does before it writes to a user.
func restored(t testing.TB, s Store, users ...string) {
	t.Helper()
	for _, u := range users {
		require.NoError(t, s.redis.MarkLoaded(context.Background(), cursors.NewStore(s.redis).RedisKey(u), redisstore.Incarnation{}))
		require.NoError(t, s.redis.MarkLoaded(context.Background(), s.RedisKey(u), redisstore.Incarnation{}))
	}
}

func tkey(user, ch string, root int64) thread.Key {
	return thread.Key{User: user, Ref: thread.Ref{Channel: ch, Root: root}}
}

// randomThreadState is a register of k with message ids a function of
// their seqs, so that the merge's outcome is order-free in every field the
// differential compares.
func randomThreadState(rng *rand.Rand, k thread.Key) thread.State {
	st := thread.State{Key: k}
	if rng.IntN(3) > 0 {
		seq := 1 + rng.Int64N(40)
		st.Cursors.Read = cursorAt(rng.Int64N(3), seq, "m"+strconv.FormatInt(seq, 10))
	}
	if rng.IntN(3) == 0 {
		seq := 1 + rng.Int64N(40)
		st.Cursors.Delivered = cursorAt(0, seq, "m"+strconv.FormatInt(seq, 10))
	}
	if rng.IntN(4) == 0 {
		seq := 1 + rng.Int64N(40)
		st.Cursors.PrivateRead = cursorAt(rng.Int64N(3), seq, "m"+strconv.FormatInt(seq, 10))
	}
	st.Cursors.DeviceID = "d" + strconv.Itoa(rng.IntN(3))
	st.Cursors.UpdatedAtUnixMs = rng.Int64N(1000)
	if rng.IntN(2) == 0 {
		st.Follow = thread.Follow{Following: rng.IntN(2) == 0, VersionUnixMs: rng.Int64N(20)}
	}
	for range rng.IntN(4) {
		st.Mentions = append(st.Mentions, 1+rng.Int64N(60))
	}
	slices.Sort(st.Mentions)
	st.Mentions = slices.Compact(st.Mentions)
	return st
}

// threadDiffs lists where got differs from want in what the merge decides
// whatever the order: the cursors' positions, their message ids, the
// follow register, the mentions (thread.Same, plus the ids).
func threadDiffs(keys []thread.Key, want map[thread.Key]thread.State, got []*thread.State) []string {
	var out []string
	for i, k := range keys {
		w, ok := want[k]
		switch {
		case !ok && got[i] == nil:
		case !ok || got[i] == nil:
			out = append(out, fmt.Sprintf("%v: want %v, got %v", k, ok, got[i] != nil))
		case !thread.Same(w, *got[i]) || got[i].Key != k ||
			w.Cursors.Read.MessageID != got[i].Cursors.Read.MessageID ||
			w.Cursors.Delivered.MessageID != got[i].Cursors.Delivered.MessageID:
			out = append(out, fmt.Sprintf("%v:\n want %+v\n  got %+v", k, w, *got[i]))
		}
	}
	return out
}

// TestThreadMergesDifferential applies random histories of registers and
// heads through the store in random orders and batches, with duplicates,
// from concurrent goroutines writing the same keys, and compares what is
// stored with thread.Merge and thread.MergeHead folded in Go.
func TestThreadMergesDifferential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	const mentionCap = 5
	s = s.WithMentionCap(mentionCap)
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var keys []thread.Key
		var refs []thread.Ref
		for _, ch := range []string{"c" + strconv.FormatUint(seed, 10), "!r:x" + strconv.FormatUint(seed, 10)} {
			for root := int64(1); root <= 3; root++ {
				ref := thread.Ref{Channel: ch, Root: root * 1000}
				refs = append(refs, ref)
				for _, u := range []string{"u1", "u2"} {
					keys = append(keys, thread.Key{User: u + "s" + strconv.FormatUint(seed, 10), Ref: ref})
				}
			}
		}
		var states []thread.State
		var heads []thread.Head
		for range 600 {
			states = append(states, randomThreadState(rng, keys[rng.IntN(len(keys))]))
			seq := rng.Int64N(50)
			heads = append(heads, thread.Head{Ref: refs[rng.IntN(len(refs))], Seq: seq, MessageID: "h" + strconv.FormatInt(seq, 10), UpdatedAtUnixMs: rng.Int64N(1000)})
		}
		want := map[thread.Key]thread.State{}
		for _, st := range states {
			cur, ok := want[st.Key]
			if !ok {
				cur = thread.State{Key: st.Key}
			}
			want[st.Key], _ = thread.Merge(cur, st, mentionCap)
		}
		wantHeads := map[thread.Ref]thread.Head{}
		for _, h := range heads {
			wantHeads[h.Ref], _ = thread.MergeHead(wantHeads[h.Ref], h)
		}

		// Duplicates, then a random order, split among the writers.
		for range 150 {
			states = append(states, states[rng.IntN(len(states))])
			heads = append(heads, heads[rng.IntN(len(heads))])
		}
		rng.Shuffle(len(states), func(i, j int) { states[i], states[j] = states[j], states[i] })
		rng.Shuffle(len(heads), func(i, j int) { heads[i], heads[j] = heads[j], heads[i] })
		const writers = 4
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wrng := rand.New(rand.NewPCG(seed, uint64(w)))
				myStates := states[w*len(states)/writers : (w+1)*len(states)/writers]
				myHeads := heads[w*len(heads)/writers : (w+1)*len(heads)/writers]
				for len(myStates) > 0 || len(myHeads) > 0 {
					n := min(len(myStates), 1+wrng.IntN(20))
					res, err := s.MergeStates(ctx, myStates[:n])
					myStates = myStates[n:]
					for _, r := range res {
						err = errors.Join(err, r.Err)
					}
					n = min(len(myHeads), 1+wrng.IntN(20))
					hres, herr := s.RaiseHeads(ctx, myHeads[:n])
					myHeads = myHeads[n:]
					for _, r := range hres {
						herr = errors.Join(herr, r.Err)
					}
					if err = errors.Join(err, herr); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		requireNoErrors(t, &wg, errs)

		got, err := s.StatesRedis(ctx, keys)
		require.NoError(t, err)
		require.Empty(t, threadDiffs(keys, want, got), "seed %d", seed)
		gotHeads, err := s.HeadsRedis(ctx, refs)
		require.NoError(t, err)
		require.Equal(t, wantHeads, gotHeads, "seed %d", seed)

		// The comparison sees a divergence: a planted one must show.
		planted := *got[0]
		planted.Mentions = append(slices.Clone(planted.Mentions), 59)
		planted.Cursors.Delivered.Position.Seq++
		require.Len(t, threadDiffs(keys[:1], want, []*thread.State{&planted}), 1)
	}
}

func TestThreadHeadsOfOneThreadInOneCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	ref := thread.Ref{Channel: "c1", Root: 7}
	res, err := s.RaiseHeads(ctx, []thread.Head{
		{Ref: ref, Seq: 3, MessageID: "m3", UpdatedAtUnixMs: 30},
		{Ref: ref, Seq: 2, MessageID: "m2", UpdatedAtUnixMs: 40},
		{Ref: ref, Seq: 5, MessageID: "m5", UpdatedAtUnixMs: 35},
		{Ref: ref, Seq: -1},
	})
	require.NoError(t, err)
	require.True(t, res[0].Advanced)
	require.False(t, res[1].Advanced)
	require.Equal(t, thread.Head{Ref: ref, Seq: 3, MessageID: "m3", UpdatedAtUnixMs: 40}, res[1].Head)
	require.True(t, res[2].Advanced)
	require.Equal(t, thread.Head{Ref: ref, Seq: 5, MessageID: "m5", UpdatedAtUnixMs: 40}, res[2].Head)
	require.Error(t, res[3].Err, "a head the layout cannot hold fails alone")
	heads, err := s.HeadsRedis(ctx, []thread.Ref{ref, {Channel: "c1", Root: 8}})
	require.NoError(t, err)
	require.Equal(t, map[thread.Ref]thread.Head{ref: res[2].Head}, heads)
}

func TestThreadCASConflictRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	other := NewStore(nil, redisstore.New(s.redis.Client(), redisstore.Config{Prefix: s.redis.Prefix()}))
	k := tkey("u1", "c1", 9)
	read := thread.State{Key: k, Cursors: receipt.State{Read: cursorAt(0, 4, "m4")}}
	follow := thread.State{Key: k, Follow: thread.Follow{Following: true, VersionUnixMs: 10}}

	// Another writer moves the field, and an erasure generation appears,
	// between the read and the first two CAS rounds: both are retried.
	var rounds []int
	s.beforeCAS = func(attempt int) {
		rounds = append(rounds, attempt)
		switch attempt {
		case 0:
			res, err := other.MergeStates(ctx, []thread.State{follow})
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
		case 1:
			require.NoError(t, s.redis.Client().HSet(ctx, s.redis.TombstoneKey("u1"), "g", "7").Err())
		}
	}
	res, err := s.MergeStates(ctx, []thread.State{read})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, []int{0, 1, 2}, rounds)
	require.True(t, res[0].Changed)
	require.Equal(t, int64(7), res[0].Generation)
	want, _ := thread.Merge(follow, read, 10)
	require.True(t, thread.Same(want, res[0].State))
	got, err := s.StatesRedis(ctx, []thread.Key{k})
	require.NoError(t, err)
	require.True(t, thread.Same(want, *got[0]))

	// A field moved before every round: the bounded retries end in an
	// error for that key alone.
	s.beforeCAS = func(attempt int) {
		f := thread.State{Key: k, Follow: thread.Follow{Following: true, VersionUnixMs: 100 + int64(attempt)}}
		_, err := other.MergeStates(ctx, []thread.State{f})
		require.NoError(t, err)
	}
	k2 := tkey("u1", "c1", 10)
	res, err = s.MergeStates(ctx, []thread.State{{Key: k, Mentions: []int64{3}}, {Key: k2, Mentions: []int64{3}}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, ErrContended)
	require.NoError(t, res[1].Err)
}

func TestUpdateThreadStatesIncoming(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	restored(t, s, "u1")
	k := tkey("u1", "c1", 9)
	_, err := s.MergeStates(ctx, []thread.State{{Key: k, Cursors: receipt.State{Read: cursorAt(0, 8, "m8")}}})
	require.NoError(t, err)
	boom := errors.New("boom")
	// A mark-unread built from the stored register, a failing incoming,
	// and a follow, all of one key in one call: each sees the previous.
	var seen []thread.State
	res, err := s.UpdateStates(ctx, []thread.Key{k, k, k, tkey("u1", "c1", 10)}, nil, func(i int, stored thread.State, found bool) (thread.State, error) {
		seen = append(seen, stored)
		switch i {
		case 0:
			require.True(t, found)
			return thread.MarkUnread(k, 5, stored.Cursors.ReadEpoch()), nil
		case 1:
			return thread.State{}, boom
		case 2:
			return thread.State{Follow: thread.Follow{Following: true, VersionUnixMs: 1}}, nil
		}
		require.False(t, found)
		return thread.State{}, nil
	})
	require.NoError(t, err)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 4}, res[0].State.Cursors.EffectiveRead())
	require.Equal(t, receipt.Position{Seq: 8}, res[0].State.Cursors.Read.Position, "the public thread read does not move back")
	require.True(t, res[0].Changed)
	require.ErrorIs(t, res[1].Err, boom)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 4}, seen[2].Cursors.EffectiveRead())
	require.True(t, res[2].State.Follow.Following)
	require.Equal(t, redisstore.GenerationUnknown, res[2].Generation)
	require.False(t, res[3].Changed, "an empty register is not stored")
	got, err := s.StatesRedis(ctx, []thread.Key{k, tkey("u1", "c1", 10)})
	require.NoError(t, err)
	require.True(t, thread.Same(res[2].State, *got[0]))
	require.Nil(t, got[1])
}

func TestUserThreads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	f := func(ch string, root, seq int64) thread.State {
		return thread.State{Key: tkey("u1", ch, root), Cursors: receipt.State{Read: cursorAt(0, seq, "m")}, Follow: thread.Follow{Following: true, VersionUnixMs: 1}}
	}
	_, err := s.MergeStates(ctx, []thread.State{f("c1", 1, 5), f("c1", 2, 5), f("c10", 1, 5), f("c", 1, 5)})
	require.NoError(t, err)
	all, complete, err := s.UserThreads(ctx, "u1", "")
	require.NoError(t, err)
	require.False(t, complete)
	require.Len(t, all, 4)
	c1, _, err := s.UserThreads(ctx, "u1", "c1")
	require.NoError(t, err)
	require.Len(t, c1, 2, "c1's threads only, not c10's")
	for _, st := range c1 {
		require.Equal(t, "c1", st.Key.Channel)
	}

	// Hydration merges (an older durable read does not win) and marks.
	require.NoError(t, s.HydrateUser(ctx, "u1", []thread.State{f("c1", 1, 2), f("c2", 4, 9)}, redisstore.Incarnation{}))
	all, complete, err = s.UserThreads(ctx, "u1", "")
	require.NoError(t, err)
	require.True(t, complete)
	require.Len(t, all, 5)
	got, err := s.StatesRedis(ctx, []thread.Key{tkey("u1", "c1", 1)})
	require.NoError(t, err)
	require.Equal(t, int64(5), got[0].Cursors.Read.Position.Seq)
	require.Error(t, s.HydrateUser(ctx, "u1", []thread.State{f("c1", 1, 2), {Key: tkey("u2", "c1", 1)}}, redisstore.Incarnation{}))

	// Bounded: past ReadMax registers the read is refused (the
	// gateway collects a user's registers back under MaxUserThreads).
	big := "u-big"
	pipe := s.redis.Client().Pipeline()
	for i := range ReadMax + 1 {
		pipe.HSet(ctx, s.RedisKey(big), threadField(thread.Ref{Channel: "c", Root: int64(i + 1)}), "+1")
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	_, _, err = s.UserThreads(ctx, big, "c")
	require.ErrorIs(t, err, ErrTooMany)
	require.NoError(t, s.redis.Client().HDel(ctx, s.RedisKey(big), threadField(thread.Ref{Channel: "c", Root: 1})).Err())
	require.NoError(t, s.redis.Client().HSet(ctx, s.RedisKey(big), redisstore.LoadedField, "1").Err())
	all, complete, err = s.UserThreads(ctx, big, "")
	require.NoError(t, err)
	require.True(t, complete)
	require.Len(t, all, ReadMax)
}

func TestThreadErasure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	k := tkey("u1", "c1", 3)
	st := thread.State{Key: k, Cursors: receipt.State{Read: cursorAt(0, 8, "m8")}, Follow: thread.Follow{Following: true, VersionUnixMs: 5}}
	res, err := s.MergeStates(ctx, []thread.State{st})
	require.NoError(t, err)
	require.Equal(t, redisstore.GenerationUnknown, res[0].Generation)
	// The erasure cleans (redacts in) the channel the register names, one
	// the user has no cursor in: its views drop the user's thread moves.
	var cleaned []string
	redact := func(_ context.Context, _, ch string) error { cleaned = append(cleaned, ch); return nil }
	env := &kind.Env{Redis: s.redis}
	ts, err := s.redis.Erase(ctx, "u1", 1000, 0, kind.ErasedHashes([]kind.Kind{StateKind}, env, "u1"), redact)
	require.NoError(t, err)
	require.Equal(t, []string{"c1"}, cleaned, "the register's channel is cleaned")
	all, complete, err := s.UserThreads(ctx, "u1", "")
	require.NoError(t, err)
	require.Empty(t, all)
	require.True(t, complete, "an erased user's threads are complete, so reads do not fall back to Postgres")

	// A register written after the erasure stays, stamped with its generation.
	res, err = s.MergeStates(ctx, []thread.State{{Key: k, Follow: thread.Follow{Following: true, VersionUnixMs: 6}}})
	require.NoError(t, err)
	require.Equal(t, ts.Generation, res[0].Generation)
	require.Equal(t, thread.Follow{Following: true, VersionUnixMs: 6}, res[0].State.Follow)
	require.Zero(t, res[0].State.Cursors.Read.Position.Seq)
}

func TestScanThreadKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	_, err := s.MergeStates(ctx, []thread.State{{Key: tkey("u1", "c1", 1), Mentions: []int64{1}}, {Key: tkey("u2", "c2", 1), Mentions: []int64{1}}})
	require.NoError(t, err)
	_, err = s.RaiseHeads(ctx, []thread.Head{{Ref: thread.Ref{Channel: "c1", Root: 1}, Seq: 1}})
	require.NoError(t, err)
	walk := func(scan func(context.Context, redisstore.ScanCursor, int64) ([]string, redisstore.ScanCursor, error)) []string {
		var out []string
		for cur := (redisstore.ScanCursor{}); !cur.Done(); {
			ids, next, err := scan(ctx, cur, 100)
			require.NoError(t, err)
			out, cur = append(out, ids...), next
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	require.Equal(t, []string{"u1", "u2"}, walk(s.ScanUsers))
	require.Equal(t, []string{"c1"}, walk(s.ScanChannels))
}

// The probe tells, riding the unread read's round trip, when a user
// surely has no thread register: the hash hydrated and empty. Unknown
// (not hydrated) or any register means the caller reads the threads.
func TestUnreadProbesThreads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	none := func() bool {
		t.Helper()
		p := s.Probe()
		// On a pipeline of its own, as the unread view's read queues it.
		_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) { p.Queue(ctx, pipe, "pu", []string{"c1"}) })
		require.NoError(t, err)
		return p.None()
	}
	require.False(t, none(), "never hydrated: unknown")
	require.NoError(t, s.HydrateUser(ctx, "pu", nil, redisstore.Incarnation{}))
	require.True(t, none(), "hydrated and empty")
	_, err := s.MergeStates(ctx, []thread.State{{Key: tkey("pu", "c1", 1), Follow: thread.Follow{Following: true, VersionUnixMs: 1}}})
	require.NoError(t, err)
	require.False(t, none(), "a register")
}

// A hot thread's head takes every raise, however many writers race: the
// merge is a max in one script, with nothing to retry or exhaust.
func TestHotThreadHeadTakesEveryRaise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newThreadStore(t)
	ref := thread.Ref{Channel: "hot", Root: 1}
	const writers, raises = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range raises {
				seq := int64(i*writers + w + 1)
				res, err := s.RaiseHeads(ctx, []thread.Head{{Ref: ref, Seq: seq, MessageID: "m", UpdatedAtUnixMs: seq}})
				if err = errors.Join(err, res[0].Err); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	requireNoErrors(t, &wg, errs)
	heads, err := s.HeadsRedis(ctx, []thread.Ref{ref})
	require.NoError(t, err)
	require.Equal(t, int64(writers*raises), heads[ref].Seq)
}

// requireNoErrors waits for the writers, then fails on any error they sent.
func requireNoErrors(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
