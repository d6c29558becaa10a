package batch_test

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/receipt"
)

type kv struct {
	k string
	v int
}

func TestDedupeKeepsGreatestPerKeyInFirstSeenOrder(t *testing.T) {
	t.Parallel()
	in := []kv{{"a", 1}, {"b", 5}, {"a", 3}, {"c", 2}, {"b", 4}, {"a", 2}}
	got := batch.Dedupe(in, func(x kv) string { return x.k }, batch.Greatest(func(x, y kv) int { return cmp.Compare(x.v, y.v) }))
	require.Equal(t, []kv{{"a", 3}, {"b", 5}, {"c", 2}}, got)
	require.Nil(t, batch.Dedupe(nil, func(x kv) string { return x.k }, func(a, _ kv) kv { return a }))
}

func TestGreatestKeepsKeptOnTie(t *testing.T) {
	t.Parallel()
	merge := batch.Greatest(func(x, y kv) int { return cmp.Compare(x.v, y.v) })
	require.Equal(t, kv{"first", 1}, merge(kv{"first", 1}, kv{"second", 1}))
	require.Equal(t, kv{"second", 2}, merge(kv{"first", 1}, kv{"second", 2}))
}

func state(user, ch string, read, deliv int64, msg string) receipt.State {
	return receipt.State{
		Key:       receipt.Key{User: user, Channel: ch},
		Read:      receipt.Cursor{Position: receipt.Position{Seq: read}, MessageID: msg},
		Delivered: receipt.Cursor{Position: receipt.Position{Seq: deliv}, MessageID: msg},
	}
}

// The persister's use: receipt.Merge field-wise, so read and delivered each
// keep their own max even when they come from different records, whatever
// the order.
func TestDedupeWithReceiptMergeIsFieldWiseAndOrderFree(t *testing.T) {
	t.Parallel()
	in := []receipt.State{
		state("u", "c", 5, 5, "m5"),
		state("u", "c", 0, 9, "m9"), // delivered only, ahead
		state("u", "c", 7, 7, "m7"), // read ahead, delivered behind
		state("u", "c", 3, 3, "m3"), // stale
		state("v", "c", 1, 1, "m1"),
	}
	key := func(s receipt.State) receipt.Key { return s.Key }
	merge := func(a, b receipt.State) receipt.State { m, _ := receipt.Merge(a, b); return m }
	want := batch.Dedupe(in, key, merge)
	require.Len(t, want, 2)
	require.Equal(t, receipt.Position{Seq: 7}, want[0].Read.Position)
	require.Equal(t, "m7", want[0].Read.MessageID)
	require.Equal(t, receipt.Position{Seq: 9}, want[0].Delivered.Position)
	require.Equal(t, "m9", want[0].Delivered.MessageID)

	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		sh := slices.Clone(in)
		r.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		got := batch.Dedupe(sh, key, merge)
		slices.SortFunc(got, func(a, b receipt.State) int { return cmp.Compare(a.Key.User, b.Key.User) })
		for i := range got {
			require.True(t, got[i].SameCursors(want[i]), "order %v gave %+v", sh, got[i])
			require.Equal(t, want[i].Read.MessageID, got[i].Read.MessageID)
			require.Equal(t, want[i].Delivered.MessageID, got[i].Delivered.MessageID)
		}
	}
}

var errRejected = errors.New("rejected")

// store is a partial mock: it rejects any write containing a bad item, all
// or nothing, like a transaction hitting a constraint.
type store struct {
	bad    map[int]bool
	rows   []int
	outage int // fail the write with this number (1-based) as an outage
	calls  int
}

func (s *store) write(items []int) error {
	s.calls++
	if s.calls == s.outage {
		return errors.New("connection refused")
	}
	for _, it := range items {
		if s.bad[it] {
			return fmt.Errorf("item %d: %w", it, errRejected)
		}
	}
	s.rows = append(s.rows, items...)
	return nil
}

func isRejected(err error) bool { return errors.Is(err, errRejected) }

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i * 10
	}
	return out
}

func TestBisectWritesAllInOneCallWhenNothingIsRejected(t *testing.T) {
	t.Parallel()
	s := &store{}
	res, err := batch.Bisect(seq(500), s.write, isRejected)
	require.NoError(t, err)
	require.Equal(t, 1, res.Writes)
	require.Empty(t, res.Failed)
	require.Equal(t, seq(500), res.Written)
}

func TestBisectIsolatesRejectedItems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int
		bad  []int // indices
	}{
		{"one of one", 1, []int{0}},
		{"first", 500, []int{0}},
		{"last", 500, []int{499}},
		{"middle", 500, []int{250}},
		{"three spread", 500, []int{3, 250, 498}},
		{"adjacent", 17, []int{8, 9}},
		{"all", 8, []int{0, 1, 2, 3, 4, 5, 6, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			items := seq(tc.n)
			s := &store{bad: map[int]bool{}}
			for _, i := range tc.bad {
				s.bad[items[i]] = true
			}
			res, err := batch.Bisect(items, s.write, isRejected)
			require.NoError(t, err)
			var failed []int
			for _, f := range res.Failed {
				failed = append(failed, f.Index)
				require.ErrorIs(t, f.Err, errRejected)
				require.Contains(t, f.Err.Error(), fmt.Sprintf("item %d:", items[f.Index]))
			}
			require.Equal(t, tc.bad, failed)
			var want []int
			for i, it := range items {
				if !slices.Contains(tc.bad, i) {
					want = append(want, it)
				}
			}
			require.Equal(t, want, res.Written)
			got := slices.Clone(s.rows)
			slices.Sort(got)
			require.Equal(t, want, got, "the store holds exactly the written items")
			require.Equal(t, res.Writes, s.calls)
			if len(tc.bad) == 1 && tc.n == 500 {
				require.LessOrEqual(t, res.Writes, 2*9+1)
			}
		})
	}
}

func TestBisectAbortsOnOutageAndReturnsItAsIs(t *testing.T) {
	t.Parallel()
	items := seq(64)
	s := &store{bad: map[int]bool{items[5]: true}, outage: 3}
	res, err := batch.Bisect(items, s.write, isRejected)
	require.EqualError(t, err, "connection refused")
	require.False(t, isRejected(err))
	require.Equal(t, 3, res.Writes, "no write after the outage")
	require.Empty(t, res.Failed)

	// The first write itself failing with an outage.
	s = &store{outage: 1}
	res, err = batch.Bisect(items, s.write, isRejected)
	require.EqualError(t, err, "connection refused")
	require.Empty(t, res.Written)
	require.Empty(t, s.rows)
}

func TestBisectEmpty(t *testing.T) {
	t.Parallel()
	res, err := batch.Bisect(nil, func([]int) error { return errors.New("never called") }, isRejected)
	require.NoError(t, err)
	require.Zero(t, res.Writes)
}

func TestBisectWriteCannotAppendIntoCallersSlice(t *testing.T) {
	t.Parallel()
	items := seq(8)
	calls := 0
	_, err := batch.Bisect(items, func(part []int) error {
		calls++
		if calls == 1 {
			return errRejected
		}
		_ = append(part, -1) // must not clobber the next half
		return nil
	}, isRejected)
	require.NoError(t, err)
	require.Equal(t, seq(8), items)
}
