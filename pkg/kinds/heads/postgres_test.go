package heads_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
)

// randomHead draws a head of few channels and seqs.
func randomHead(r *rand.Rand) any {
	h := channel.Head{Channel: "c" + strconv.Itoa(r.IntN(3)), Seq: 1 + r.Int64N(30), UpdatedAtUnixMs: 1 + r.Int64N(1e6)}
	h.MessageID = "h" + strconv.FormatInt(h.Seq, 10)
	return h
}

// The kind passes the conformance suite: its rule obeys the merge laws,
// and write.sql and Redis keep what channel.MergeHead keeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	env := kindtest.Env(t)
	kindtest.MergeLaws(t, heads.Kind, env, randomHead)
	kindtest.StoresAgree(t, heads.Kind, env, randomHead)
}

// write.sql agrees with channel.MergeHead: random heads, one statement
// each in random order with duplicates, end with the head the Go fold
// computes; the page walks in channel order; a bounded CHECK refuses a
// head at seq 0 (the persister dead-letters it).
func TestPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := heads.NewStore(pgtest.NewSchema(t).Store, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 40 {
		ch := "c" + strconv.Itoa(trial)
		n := 1 + rng.IntN(8)
		hs := make([]channel.Head, n)
		for i := range hs {
			hs[i] = channel.Head{Channel: ch, Seq: 1 + rng.Int64N(30), UpdatedAtUnixMs: 1000}
			hs[i].MessageID = "h" + strconv.FormatInt(hs[i].Seq, 10)
		}
		order := kindtest.Replay(rng, n)
		var want channel.Head
		for _, i := range order {
			want, _ = channel.MergeHead(want, hs[i])
			_, err := s.WritePG(ctx, []channel.Head{hs[i]})
			require.NoError(t, err)
		}
		got, err := s.ReadPG(ctx, []string{ch, "nope"})
		require.NoError(t, err)
		require.Equal(t, []channel.Head{want}, got, "trial %d", trial)
	}

	_, err := s.WritePG(ctx, []channel.Head{{Channel: "a", Seq: 1}, {Channel: "b", Seq: 2}, {Channel: "c", Seq: 3}})
	require.NoError(t, err)
	page, err := s.PagePG(ctx, "a", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, []string{page[0].Channel, page[1].Channel})
	require.Len(t, page, 10, "b, c, then the trials' c0, c1, c10…: as many as asked for")

	_, err = s.WritePG(ctx, []channel.Head{{Channel: "x", Seq: 0}})
	require.ErrorIs(t, err, pgstore.ErrRejected)
}
