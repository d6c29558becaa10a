package cursors

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

func cur(epoch, seq int64, msg string) receipt.Cursor {
	return receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: seq}, MessageID: msg}
}

func TestBase62(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{0, 1, 9, 10, 35, 36, 61, 62, 3843, 3844, 1 << 53, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		s := string(redisstore.AppendB62(nil, n))
		got, err := redisstore.ParseB62(s)
		require.NoError(t, err, s)
		require.Equal(t, n, got, s)
	}
	require.Equal(t, "0", string(redisstore.AppendB62(nil, 0)))
	require.Equal(t, "Z", string(redisstore.AppendB62(nil, 35)))
	require.Equal(t, "a", string(redisstore.AppendB62(nil, 36)))
	require.Equal(t, "10", string(redisstore.AppendB62(nil, 62)))
	require.Equal(t, "AzL8n0Y58m7", string(redisstore.AppendB62(nil, math.MaxInt64)))
	for _, bad := range []string{"", "-1", "a.b", "AzL8n0Y58m8", "zzzzzzzzzzz", "100000000000", "é"} {
		_, err := redisstore.ParseB62(bad)
		require.Error(t, err, "%q", bad)
	}
	// Order: for numbers without leading zeros, (length, bytes) order is
	// numeric order — the property the Lua script's cmp relies on.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		a, b := rng.Int64()>>rng.IntN(63), rng.Int64()>>rng.IntN(63)
		sa, sb := string(redisstore.AppendB62(nil, a)), string(redisstore.AppendB62(nil, b))
		byLenThenBytes := len(sa) < len(sb) || (len(sa) == len(sb) && sa < sb)
		require.Equal(t, a < b, byLenThenBytes, "%d %d", a, b)
	}
}

// The exact layout, pinned: a change here is a format change that needs
// the old format kept readable.
func TestEncodeValueLayout(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	const ts = 1795416092504
	cases := []struct {
		st   receipt.State
		want string
	}{
		{receipt.State{Key: k, Read: cur(0, 9876, "m9876"), Delivered: cur(0, 9876, "m9876"), DeviceID: "d1", UpdatedAtUnixMs: ts}, "2ZI m9876 d1 VbmAx6e"},
		// read ahead of delivered: delivered is raised with it
		{receipt.State{Key: k, Read: cur(0, 9876, "m9876"), Delivered: cur(0, 5, "m5"), DeviceID: "d1", UpdatedAtUnixMs: ts}, "2ZI m9876 d1 VbmAx6e"},
		// delivered ahead of read
		{receipt.State{Key: k, Read: cur(0, 16, "m16"), Delivered: cur(0, 18, "m18"), DeviceID: "d0", UpdatedAtUnixMs: ts}, "G m16 d0 VbmAx6e I m18"},
		// delivered only
		{receipt.State{Key: k, Delivered: cur(0, 18, "m18"), UpdatedAtUnixMs: ts}, "0   VbmAx6e I m18"},
		// a read position without an id is dropped with it
		{receipt.State{Key: k, Read: cur(0, 0, "x"), Delivered: cur(0, 18, "m18")}, "0   0 I m18"},
		// epochs; same position, different ids: both kept
		// (a delivered epoch, which only legacy values hold, is kept; the
		// read raises its seq)
		{receipt.State{Key: k, Read: cur(1, 16, "a"), Delivered: cur(2, 3, "b"), DeviceID: "d"}, "1.G a d 0 2.G a"},
		// the private read: a position without id, while ahead of read
		{receipt.State{Key: k, Read: cur(0, 10, "m10"), PrivateRead: cur(0, 12, "x")}, "A m10  0 C"},
		{receipt.State{Key: k, Read: cur(1, 4, "m4"), Delivered: cur(0, 10, "m10"), PrivateRead: cur(1, 6, "")}, "1.4 m4  0 A m10 1.6"},
		{receipt.State{Key: k, Read: cur(0, 10, "m10"), PrivateRead: cur(0, 5, "")}, "A m10  0"},
		{receipt.State{Key: k, PrivateRead: cur(0, 5, "")}, "0   0 5"},
		{receipt.State{Key: k, Read: cur(1, 16, "a"), Delivered: cur(1, 16, "b")}, "1.G a  0 1.G b"},
		{receipt.State{Key: k, Read: cur(math.MaxInt64, math.MaxInt64, "")}, "AzL8n0Y58m7.AzL8n0Y58m7   0 AzL8n0Y58m7 "},
		// nothing to store
		{receipt.State{Key: k, Read: cur(0, 0, "x"), DeviceID: "d"}, ""},
	}
	for _, c := range cases {
		got, err := encodeValue(c.st)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%+v", c.st)
		if got == "" {
			continue
		}
		back, err := decodeValue(k, got)
		require.NoError(t, err)
		want, _ := receipt.Merge(receipt.State{Key: k}, c.st)
		want.PrivateRead.MessageID = ""
		require.Equal(t, want, back)
	}
	for _, bad := range []receipt.State{
		{Key: k, Read: cur(0, 1, "a b")},
		{Key: k, Read: cur(0, 1, "a"), DeviceID: "x y"},
		{Key: k, Read: cur(0, -1, "a")},
		{Key: k, Read: cur(-1, 1, "a")},
		{Key: k, Read: cur(0, 1, "a"), UpdatedAtUnixMs: -1},
	} {
		_, err := encodeValue(bad)
		require.Error(t, err, "%+v", bad)
	}
	for _, bad := range []string{"x", "1 a b", "1 a b c d e f g h", "1 a b zzzzzzzzzzzz", "1.1.1 a b 0", "v1:1:2", "-1 a b 0", "1 a b 0 -", "1 a b 0 2 m -"} {
		_, err := decodeValue(k, bad)
		require.Error(t, err, "%q", bad)
	}
}

// newTestStore is a Store on a fresh per-test prefix, scripts loaded.
func newTestStore(t *testing.T) (Store, func(string) Store) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	s := NewStore(redisstore.New(rdb, redisstore.Config{Prefix: prefix}))
	require.NoError(t, s.redis.Load(ctx))
	v1 := newV1Store(rdb, prefix)
	require.NoError(t, v1.redis.Load(ctx))
	return s, func(layout string) Store {
		if layout == "v1" {
			return v1
		}
		return s
	}
}

func (s Store) raw(t *testing.T, k receipt.Key) string {
	v, err := s.redis.Client().HGet(context.Background(), s.RedisKey(k.User), k.Channel).Result()
	require.NoError(t, err)
	return v
}

func mergeOne(t *testing.T, s Store, st receipt.State) MergeResult {
	t.Helper()
	res, err := s.Merge(context.Background(), []receipt.State{st})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return res[0]
}

// Every field shape survives the real script: merged into an empty field,
// read back by Get, and merged again (a no-op).
func TestMergeFieldShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	long := strings.Repeat("é", receipt.MaxIDLength/2)
	big := int64(math.MaxInt64)
	shapes := []receipt.State{
		{Read: cur(0, 1, "m1"), Delivered: cur(0, 1, "m1"), DeviceID: "d0", UpdatedAtUnixMs: 1795416092504},
		{Read: cur(3, 7, "m7"), Delivered: cur(3, 7, "m7"), DeviceID: "d0", UpdatedAtUnixMs: 1},
		{Read: cur(0, big, "top"), Delivered: cur(0, big, "top"), DeviceID: "d", UpdatedAtUnixMs: big},
		{Read: cur(big, big-1, "a"), Delivered: cur(big, big, "b"), UpdatedAtUnixMs: 0},
		{Read: cur(0, 1<<53+1, ""), Delivered: cur(0, 1<<53+3, ""), DeviceID: ""},
		{Read: cur(0, 5, long), Delivered: cur(0, 9, long+"x"), DeviceID: long},
		{Read: cur(0, 10, "m10"), Delivered: cur(0, 12, "m12"), DeviceID: "d2", UpdatedAtUnixMs: 99},  // delivered ahead
		{Read: cur(0, 12, "m12"), Delivered: cur(0, 10, "m10"), DeviceID: "d2", UpdatedAtUnixMs: 99},  // read ahead
		{Delivered: cur(0, 12, "m12"), DeviceID: "d2", UpdatedAtUnixMs: 99},                           // delivered only
		{Read: cur(2, 1, "m1"), Delivered: cur(0, 1<<40, "old"), DeviceID: "d2", UpdatedAtUnixMs: 99}, // epoch beats seq
		{Read: cur(0, 4, "v1"), Delivered: cur(0, 4, "v1:"[:2]), DeviceID: "v1"},                      // ids like the old tag
		{Read: cur(0, 4, "a.b"), Delivered: cur(0, 5, "0"), DeviceID: "."},
	}
	for i, sh := range shapes {
		sh.Key = receipt.Key{User: "u" + strconv.Itoa(i%3), Channel: "c" + strconv.Itoa(i)}
		want, _ := receipt.Merge(receipt.State{Key: sh.Key}, sh)
		res := mergeOne(t, s, sh)
		require.True(t, res.Advanced, "%d", i)
		require.Equal(t, want, res.State, "%d", i)
		enc, err := encodeValue(sh)
		require.NoError(t, err)
		require.Equal(t, enc, s.raw(t, sh.Key), "%d: stored as encoded", i)
		got, _, err := s.Get(ctx, sh.Key.User, []string{sh.Key.Channel})
		require.NoError(t, err)
		require.Equal(t, []receipt.State{want}, got, "%d", i)
		again := mergeOne(t, s, sh)
		require.False(t, again.Advanced, "%d", i)
		require.Equal(t, want, again.State, "%d", i)
	}
	all, complete, err := s.Get(ctx, "u0", nil)
	require.NoError(t, err)
	require.False(t, complete)
	require.Len(t, all, 4)
}

// randState draws marks around a base so that positions collide often, with
// the message id a function of the position (so that the cursors of every
// order converge exactly, ids included) unless anyID: then two marks at one
// position may name different messages (a tie keeps the stored id).
func randState(rng *rand.Rand, k receipt.Key, base int64, anyID bool) receipt.State {
	c := func() receipt.Cursor {
		if rng.IntN(6) == 0 {
			return receipt.Cursor{}
		}
		p := receipt.Position{Epoch: rng.Int64N(3), Seq: base + rng.Int64N(30)}
		if anyID { // few positions: ties are the point
			p = receipt.Position{Seq: base + rng.Int64N(4)}
		}
		id := "m" + strconv.FormatInt(p.Epoch, 10) + "." + strconv.FormatInt(p.Seq, 10)
		if p.Seq%5 == 0 {
			id = ""
		}
		if anyID && rng.IntN(2) == 0 {
			id = "x" + strconv.Itoa(rng.IntN(2))
		}
		return receipt.Cursor{Position: p, MessageID: id}
	}
	deliv := c()
	deliv.Position.Epoch = 0 // there is no mark-undelivered
	if deliv.Position.Seq%5 != 0 && deliv.Position.Seq != 0 {
		deliv.MessageID = "m0." + strconv.FormatInt(deliv.Position.Seq, 10)
	}
	st := receipt.State{Key: k, Read: c(), Delivered: deliv, DeviceID: "d" + strconv.Itoa(rng.IntN(3)),
		UpdatedAtUnixMs: []int64{0, 61, 62, 3843, 3844, 1795416092504, 1795416092504 + rng.Int64N(1000)}[rng.IntN(7)]}
	if rng.IntN(8) == 0 {
		st.DeviceID = ""
	}
	if rng.IntN(3) == 0 { // the stores keep a private read's position only
		st.PrivateRead = receipt.Cursor{Position: receipt.Position{Epoch: rng.Int64N(3), Seq: base + rng.Int64N(30)}}
	}
	return st
}

var randBases = []int64{0, 30, 3830, 1<<53 - 15, math.MaxInt64 - 30}

// The script agrees exactly with receipt.Merge (the model: cursors, ids,
// device, time and the advanced flag) at every step, from an empty field or
// from a value written by the previous version, and random orders with
// duplicates converge to the same cursors.
func TestMergeMatchesModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, store := newTestStore(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 150 {
		base := randBases[trial%len(randBases)]
		key := receipt.Key{User: "u" + strconv.Itoa(trial), Channel: "c"}
		anyID := trial%3 == 2
		events := make([]receipt.State, 1+rng.IntN(10))
		for i := range events {
			events[i] = randState(rng, key, base, anyID)
		}
		// First event through the layout of this trial (v1 or compact), the
		// rest through the compact one; one pipeline per step and one for a
		// whole batch with duplicates.
		first := []string{"compact", "v1"}[trial%2]
		model := receipt.State{Key: key}
		if first == "v1" {
			// The previous build wrote epoch 0 only (no mark-unread),
			// and no private read.
			events[0].Read.Position.Epoch = 0
			events[0].PrivateRead = receipt.Cursor{}
			if events[0].Read.MessageID != "" {
				events[0].Read.MessageID = "m0." + strconv.FormatInt(events[0].Read.Position.Seq, 10)
			}
		}
		for i, e := range events {
			w := s
			if i == 0 {
				w = store(first)
			}
			want, adv := receipt.Merge(model, e)
			if want.Read.Position.IsZero() && want.Delivered.Position.IsZero() && want.PrivateRead.Position.IsZero() {
				// nothing stored yet: Get and Merge answer the zero state
				want = receipt.State{Key: key}
			}
			res := mergeOne(t, w, e)
			require.Equal(t, adv, res.Advanced, "trial %d step %d (%s): %+v into %+v", trial, i, first, e, model)
			require.Equal(t, want, res.State, "trial %d step %d (%s): %+v into %+v", trial, i, first, e, model)
			model = want
		}
		if !model.Delivered.Position.IsZero() || !model.PrivateRead.Position.IsZero() {
			got, _, err := s.Get(ctx, key.User, []string{"c"})
			require.NoError(t, err)
			require.Equal(t, []receipt.State{model}, got, "trial %d", trial)
		}

		// The same events in other orders, with duplicates, into other keys.
		for o := range 3 {
			if anyID {
				break // ties on a position keep whichever id came first
			}
			k2 := receipt.Key{User: key.User, Channel: "p" + strconv.Itoa(o)}
			order := rng.Perm(len(events))
			order = append(order, order[:rng.IntN(len(order)+1)]...)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			batch := make([]receipt.State, len(order))
			for i, j := range order {
				batch[i] = events[j]
				batch[i].Key = k2
			}
			// one pipeline for all but the first, which goes in first, alone
			w := s
			if order[0] == 0 { // only events[0] is of the previous build's shape
				w = store(first)
			}
			mergeOne(t, w, batch[0])
			res, err := s.Merge(ctx, batch[1:])
			require.NoError(t, err)
			for _, r := range res {
				require.NoError(t, r.Err)
			}
			got, _, err := s.Get(ctx, key.User, []string{k2.Channel})
			require.NoError(t, err)
			if model.Delivered.Position.IsZero() && model.PrivateRead.Position.IsZero() {
				require.Empty(t, got)
				continue
			}
			require.Len(t, got, 1)
			require.True(t, model.SameCursors(got[0]), "trial %d order %v: %+v vs %+v", trial, order, model, got[0])
			require.Equal(t, model.Read, got[0].Read, "trial %d order %v", trial, order)
		}
	}
}

// Values written by the previous version (a live Redis upgraded in place)
// are read by Get, merged by Merge and Hydrate, left as they are when
// nothing advances, and rewritten compactly when something does.
func TestV1ValuesStillMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, store := newTestStore(t)
	v1 := store("v1")
	big := int64(math.MaxInt64)
	k := func(ch string) receipt.Key { return receipt.Key{User: "old", Channel: ch} }
	olds := []receipt.State{
		{Key: k("a"), Read: cur(0, 10, "m10"), Delivered: cur(0, 10, "m10"), DeviceID: "d1", UpdatedAtUnixMs: 1795416092504},
		{Key: k("b"), Read: cur(0, big-2, "x"), Delivered: cur(0, big-1, "y"), DeviceID: "d1", UpdatedAtUnixMs: 7},
		{Key: k("c"), Read: cur(2, 1<<53+1, ""), Delivered: cur(2, 1<<53+1, ""), DeviceID: ""},
		{Key: k("d"), Delivered: cur(0, 4, "m4"), DeviceID: "d2", UpdatedAtUnixMs: 5},
	}
	for _, o := range olds {
		res := mergeOne(t, v1, o)
		require.True(t, res.Advanced)
		require.True(t, strings.HasPrefix(s.raw(t, o.Key), "v1:"), s.raw(t, o.Key))
	}
	got, complete, err := s.Get(ctx, "old", []string{"a", "b", "c", "d"})
	require.NoError(t, err)
	require.False(t, complete)
	require.Equal(t, olds, got)

	// Stale or duplicate marks: no advance, the v1 value stays untouched.
	for _, m := range []receipt.State{
		{Key: k("a"), Read: cur(0, 9, "m9"), Delivered: cur(0, 10, "m10"), DeviceID: "zz", UpdatedAtUnixMs: 1 << 60},
		{Key: k("b"), Read: cur(0, big-2, "x"), Delivered: cur(0, big-1, "other")},
		{Key: k("c"), Read: cur(2, 1<<53, "z"), Delivered: cur(1, 1<<60, "z")},
		{Key: k("d"), Delivered: cur(0, 3, "m3")},
	} {
		before := s.raw(t, m.Key)
		res := mergeOne(t, s, m)
		require.False(t, res.Advanced, "%+v", m)
		require.Equal(t, before, s.raw(t, m.Key))
	}

	// Advancing marks: exact comparison above 2^53, epochs, ids with their
	// positions; the value is rewritten in the compact layout.
	steps := []struct {
		in, want receipt.State
	}{
		{
			receipt.State{Key: k("a"), Delivered: cur(0, 11, "m11"), DeviceID: "d2", UpdatedAtUnixMs: 1795416092000},
			receipt.State{Key: k("a"), Read: cur(0, 10, "m10"), Delivered: cur(0, 11, "m11"), DeviceID: "d2", UpdatedAtUnixMs: 1795416092504},
		},
		{
			receipt.State{Key: k("b"), Read: cur(0, big, "z"), Delivered: cur(0, big, "z"), DeviceID: "d3", UpdatedAtUnixMs: 8},
			receipt.State{Key: k("b"), Read: cur(0, big, "z"), Delivered: cur(0, big, "z"), DeviceID: "d3", UpdatedAtUnixMs: 8},
		},
		{
			receipt.State{Key: k("c"), Read: cur(2, 1<<53+2, "n"), DeviceID: "d", UpdatedAtUnixMs: 3},
			receipt.State{Key: k("c"), Read: cur(2, 1<<53+2, "n"), Delivered: cur(2, 1<<53+2, "n"), DeviceID: "d", UpdatedAtUnixMs: 3},
		},
		{
			// a read at a new epoch never drags delivered back (by seq)
			receipt.State{Key: k("d"), Read: cur(1, 1, "m1"), DeviceID: "d1", UpdatedAtUnixMs: 4},
			receipt.State{Key: k("d"), Read: cur(1, 1, "m1"), Delivered: cur(0, 4, "m4"), DeviceID: "d1", UpdatedAtUnixMs: 5},
		},
	}
	for _, st := range steps {
		res := mergeOne(t, s, st.in)
		require.True(t, res.Advanced, "%+v", st.in)
		require.Equal(t, st.want, res.State)
		raw := s.raw(t, st.in.Key)
		require.NotContains(t, raw, ":", "rewritten compactly")
		enc, err := encodeValue(st.want)
		require.NoError(t, err)
		require.Equal(t, enc, raw)
	}

	// A stored value with delivered behind read (which no writer of ours
	// leaves, but a hand-made or foreign value may hold): the merge restores
	// "reading implies delivery".
	require.NoError(t, v1.redis.Client().HSet(ctx, s.RedisKey("old"), "g", "v1:0:10:m10:0:5:m5:d1:9").Err())
	res := mergeOne(t, s, receipt.State{Key: k("g"), Delivered: cur(0, 7, "m7"), DeviceID: "d2", UpdatedAtUnixMs: 8})
	require.True(t, res.Advanced)
	require.Equal(t, receipt.State{Key: k("g"), Read: cur(0, 10, "m10"), Delivered: cur(0, 10, "m10"), DeviceID: "d2", UpdatedAtUnixMs: 9}, res.State)
	require.NoError(t, v1.redis.Client().HDel(ctx, s.RedisKey("old"), "g").Err())

	// Hydrate over v1 values: older durable states change nothing, newer
	// ones win, and the hash is then complete.
	require.NoError(t, v1.redis.Client().HSet(ctx, s.RedisKey("old"), "e", "v1:0:20:m20:0:21:m21:d1:9").Err())
	require.NoError(t, s.Hydrate(ctx, "old", []receipt.State{
		{Key: k("e"), Read: cur(0, 19, "m19"), Delivered: cur(0, 22, "m22"), DeviceID: "pg", UpdatedAtUnixMs: 10},
		{Key: k("a"), Read: cur(0, 1, "m1"), DeviceID: "pg"},
		{Key: k("f"), Read: cur(0, 1, "m1"), DeviceID: "pg", UpdatedAtUnixMs: 1},
	}, redisstore.Incarnation{}))
	all, complete, err := s.Get(ctx, "old", nil)
	require.NoError(t, err)
	require.True(t, complete)
	byCh := map[string]receipt.State{}
	for _, st := range all {
		byCh[st.Key.Channel] = st
	}
	require.Len(t, byCh, 6)
	require.Equal(t, receipt.State{Key: k("e"), Read: cur(0, 20, "m20"), Delivered: cur(0, 22, "m22"), DeviceID: "pg", UpdatedAtUnixMs: 10}, byCh["e"])
	require.Equal(t, steps[0].want, byCh["a"])
	require.Equal(t, receipt.State{Key: k("f"), Read: cur(0, 1, "m1"), Delivered: cur(0, 1, "m1"), DeviceID: "pg", UpdatedAtUnixMs: 1}, byCh["f"])
}

// Hydrate in several script calls (256 states each): only the last marks the
// hash complete, and a newer value already in Redis is never undone.
func TestHydrateChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	newer := receipt.State{Key: receipt.Key{User: "h", Channel: "c7"}, Read: cur(0, 500, "m500"), Delivered: cur(0, 501, "m501"), DeviceID: "rt", UpdatedAtUnixMs: 2}
	mergeOne(t, s, newer)
	states := make([]receipt.State, 600)
	for i := range states {
		states[i] = receipt.State{Key: receipt.Key{User: "h", Channel: "c" + strconv.Itoa(i)}, Read: cur(0, int64(i+1), "m"+strconv.Itoa(i+1)), DeviceID: "pg", UpdatedAtUnixMs: 1}
	}
	require.NoError(t, s.Hydrate(ctx, "h", states, redisstore.Incarnation{}))
	all, complete, err := s.Get(ctx, "h", nil)
	require.NoError(t, err)
	require.True(t, complete)
	require.Len(t, all, 600)
	got, _, err := s.Get(ctx, "h", []string{"c7", "c599", "nope"})
	require.NoError(t, err)
	require.Equal(t, []receipt.State{newer, {Key: receipt.Key{User: "h", Channel: "c599"}, Read: cur(0, 600, "m600"), Delivered: cur(0, 600, "m600"), DeviceID: "pg", UpdatedAtUnixMs: 1}}, got)

	// A state the layout cannot hold fails the call before anything is
	// written, and the hash is not marked complete.
	require.Error(t, s.Hydrate(ctx, "h2", []receipt.State{
		{Key: receipt.Key{User: "h2", Channel: "a"}, Read: cur(0, 1, "ok")},
		{Key: receipt.Key{User: "h2", Channel: "b"}, Read: cur(0, 1, "not ok")},
	}, redisstore.Incarnation{}))
	n, err := s.redis.Client().Exists(ctx, s.RedisKey("h2")).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// A state the layout cannot hold fails alone; the rest of the batch merges.
// A state without any position changes nothing and reports what is stored.
func TestMergeRefusesUnstorable(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	k := func(ch string) receipt.Key { return receipt.Key{User: "r", Channel: ch} }
	res, err := s.Merge(context.Background(), []receipt.State{
		{Key: k("a"), Read: cur(0, 1, "m1")},
		{Key: k("b"), Read: cur(0, 1, "m 1")},
		{Key: k("c"), Read: cur(0, -1, "m1")},
		{Key: k("d"), Read: cur(0, 2, "m2"), UpdatedAtUnixMs: -5},
		{Key: k("a"), DeviceID: "x"},
		{Key: k("e"), DeviceID: "x"},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.True(t, res[0].Advanced)
	for _, i := range []int{1, 2, 3} {
		require.Error(t, res[i].Err, "%d", i)
		require.Equal(t, k(string(rune('a'+i))), res[i].State.Key)
	}
	require.NoError(t, res[4].Err)
	require.False(t, res[4].Advanced)
	require.Equal(t, res[0].State, res[4].State)
	require.NoError(t, res[5].Err)
	require.False(t, res[5].Advanced)
	require.Equal(t, receipt.State{Key: k("e")}, res[5].State)
	n, err := s.redis.Client().HLen(context.Background(), s.RedisKey("r")).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}
