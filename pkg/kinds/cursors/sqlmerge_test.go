package cursors_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

func pos(e, s int64) receipt.Cursor {
	c := receipt.Cursor{Position: receipt.Position{Epoch: e, Seq: s}}
	if s > 0 {
		c.MessageID = "m" + strconv.FormatInt(e, 10) + "." + strconv.FormatInt(s, 10)
	}
	return c
}

// The SQL merge agrees with the Go rule (receipt.Merge; the heads' and
// the members' are their kinds'): random events, one
// statement each in random order with duplicates, end with the state the
// Go fold computes.
func TestSQLMergesMatchTheRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := cursors.NewPostgres(pgtest.NewSchema(t).Store)
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 40 {
		ch := "c" + strconv.Itoa(trial)
		k := receipt.Key{User: "u" + strconv.Itoa(trial%7), Channel: ch}
		n := 1 + rng.IntN(8)
		states := make([]receipt.State, n)
		for i := range n {
			states[i] = receipt.State{Key: k, Read: pos(rng.Int64N(3), rng.Int64N(20)), Delivered: pos(0, rng.Int64N(20)), DeviceID: "d", UpdatedAtUnixMs: 1000}
			if rng.IntN(2) == 0 {
				states[i].PrivateRead = receipt.Cursor{Position: receipt.Position{Epoch: rng.Int64N(3), Seq: rng.Int64N(25)}}
			}
			states[i], _ = receipt.Merge(receipt.State{}, states[i]) // as the persister writes a row
			if states[i].Validate() != nil {
				states[i].Delivered = pos(0, 1)
			}
		}
		order := rng.Perm(n)
		order = append(order, order[:rng.IntN(n+1)]...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

		var wantSt receipt.State
		for _, i := range order {
			wantSt, _ = receipt.Merge(wantSt, states[i])

			_, err := s.Upsert(ctx, []receipt.State{states[i]})
			require.NoError(t, err)
		}
		got, err := s.Get(ctx, k.User, []string{ch})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.True(t, got[0].SameCursors(wantSt), "trial %d: %+v vs %+v", trial, got[0], wantSt)
		require.Equal(t, wantSt.Read, got[0].Read)
		require.Equal(t, wantSt.EffectiveRead(), got[0].EffectiveRead())
	}
}
