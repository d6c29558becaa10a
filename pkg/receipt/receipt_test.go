package receipt_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

func cur(epoch, seq int64, msg string) receipt.Cursor {
	return receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: seq}, MessageID: msg}
}

func TestPositionCompare(t *testing.T) {
	t.Parallel()
	p := func(e, s int64) receipt.Position { return receipt.Position{Epoch: e, Seq: s} }
	require.Equal(t, 0, p(0, 5).Compare(p(0, 5)))
	require.Equal(t, -1, p(0, 5).Compare(p(0, 6)))
	require.Equal(t, 1, p(1, 1).Compare(p(0, 1<<62)), "epoch dominates seq")
	require.Equal(t, -1, p(0, 1<<62).Compare(p(1, 0)))
}

func TestMergeKeepsMessageIDWithItsSeq(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	stored := receipt.State{Key: k, Read: cur(0, 10, "m10"), Delivered: cur(0, 10, "m10"), DeviceID: "a", UpdatedAtUnixMs: 1}
	in := receipt.State{Key: k, Read: cur(0, 8, "m8"), Delivered: cur(0, 12, "m12"), DeviceID: "b", UpdatedAtUnixMs: 2}
	got, advanced := receipt.Merge(stored, in)
	require.True(t, advanced)
	require.Equal(t, cur(0, 10, "m10"), got.Read)
	require.Equal(t, cur(0, 12, "m12"), got.Delivered)
	require.Equal(t, "b", got.DeviceID)

	again, advanced := receipt.Merge(got, in)
	require.False(t, advanced, "a duplicate is a no-op")
	require.Equal(t, got, again)
}

func TestMergeReadImpliesDelivered(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	got, _ := receipt.Merge(receipt.State{Key: k, Delivered: cur(0, 3, "m3")}, receipt.State{Key: k, Read: cur(0, 9, "m9")})
	require.Equal(t, cur(0, 9, "m9"), got.Delivered)
}

// The max-register laws, checked on random states: merging in any order, with
// any duplicates, gives the same cursors.
func TestMergeIsOrderInsensitive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	k := receipt.Key{User: "u", Channel: "c"}
	for trial := 0; trial < 500; trial++ {
		events := make([]receipt.State, 1+rng.IntN(12))
		for i := range events {
			events[i] = receipt.State{Key: k, Read: cur(rng.Int64N(2), rng.Int64N(20), "r"), Delivered: cur(rng.Int64N(2), rng.Int64N(20), "d")}
		}
		fold := func(order []int) receipt.State {
			var s receipt.State
			for _, i := range order {
				s, _ = receipt.Merge(s, events[i])
			}
			return s
		}
		order := rng.Perm(len(events))
		dup := append(append([]int{}, order...), order[:len(order)/2]...)
		rng.Shuffle(len(dup), func(i, j int) { dup[i], dup[j] = dup[j], dup[i] })
		a, b := fold(order), fold(dup)
		require.True(t, a.SameCursors(b), "trial %d: %+v vs %+v", trial, a, b)
		for _, e := range events {
			require.True(t, a.Read.Position.Compare(e.Read.Position) >= 0)
			require.True(t, a.Delivered.Position.Compare(e.Delivered.Position) >= 0)
		}
	}
}

func TestKafkaKeyRoundTrip(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "alice", Channel: "general"}
	got, ok := receipt.ParseKafkaKey(k.KafkaKey())
	require.True(t, ok)
	require.Equal(t, k, got)
	for _, bad := range []string{"", "nocolon", ":c", "u:"} {
		_, ok := receipt.ParseKafkaKey(bad)
		require.False(t, ok, bad)
	}
}

func TestValidateID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		id     string
		reason string // substring; "" means valid
	}{
		{"u1", ""},
		{"élève-42_x.y@z", ""},
		{strings.Repeat("a", receipt.MaxIDLength), ""},
		{"", "is required"},
		{strings.Repeat("a", receipt.MaxIDLength+1), "limit is 128"},
		{"a:b", "contains ':'"},
		{"a b", "whitespace"},
		{"a\x00b", "control"},
		{"a\x7fb", "control"},
		{"a\u200bb", "non-printable"},
		{"\xff", "UTF-8"},
	}
	for _, c := range cases {
		err := receipt.ValidateID("user_id", c.id)
		if c.reason == "" {
			require.NoError(t, err, "%q", c.id)
			continue
		}
		require.ErrorContains(t, err, c.reason, "%q", c.id)
		require.ErrorContains(t, err, "user_id", "the error names the field")
	}
	require.NoError(t, receipt.ValidateOptionalID("device_id", ""))
	require.Error(t, receipt.ValidateSeq("seq", 0))
	require.Error(t, receipt.ValidateSeq("seq", -1))
	require.NoError(t, receipt.ValidateSeq("seq", 1<<62))
}
