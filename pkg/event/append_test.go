package event

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

// AppendReceipt writes exactly the bytes of Encode plus StampGeneration,
// for states with any mix of cursors, ids, times, epochs (also
// EpochCurrent, a negative number) and generations; EncodeReceipts the
// same records, keys included.
func TestAppendReceiptMatchesEncode(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	num := func() int64 {
		switch rng.IntN(5) {
		case 0:
			return 0
		case 1:
			return receipt.EpochCurrent
		case 2:
			return rng.Int64()
		}
		return rng.Int64N(300)
	}
	str := func(p string) string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return p + strconv.Itoa(rng.IntN(1_000_000))
	}
	cur := func() receipt.Cursor {
		if rng.IntN(3) == 0 {
			return receipt.Cursor{}
		}
		return receipt.Cursor{Position: receipt.Position{Epoch: num(), Seq: num()}, MessageID: str("m")}
	}
	var states []receipt.State
	var gens []int64
	for range 2000 {
		s := receipt.State{Key: receipt.Key{User: str("u"), Channel: str("c")}, Read: cur(), Delivered: cur(), PrivateRead: cur(),
			DeviceID: str("d"), UpdatedAtUnixMs: num()}
		gen := num()
		rec, err := Encode(s)
		require.NoError(t, err)
		StampGeneration(rec, gen)
		require.Equal(t, rec.Value, AppendReceipt(nil, s, gen), "%+v gen %d", s, gen)
		states, gens = append(states, s), append(gens, gen)
	}
	recs := EncodeReceipts(states, gens, "topic")
	for i, s := range states {
		rec, err := Encode(s)
		require.NoError(t, err)
		StampGeneration(rec, gens[i])
		require.Equal(t, "topic", recs[i].Topic)
		require.Equal(t, rec.Key, recs[i].Key)
		require.Equal(t, rec.Value, recs[i].Value)
		require.LessOrEqual(t, len(AppendReceipt(nil, s, gens[i])), receiptSizeBound(s))
	}
}
