package mentions

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// The SQL union and its retention agree with channel.MergeMentions:
// random seqs, one statement each in random order with duplicates and
// trims at random moments, read as the Go fold's newest cap+1, and a
// last trim leaves exactly those rows.
func TestPostgresKeepsWhatMergeMentionsKeeps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	const capN = 4
	s := NewStore(pg, nil).WithMentionCap(capN)
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 40 {
		k := receipt.Key{User: "u" + strconv.Itoa(trial%7), Channel: "c" + strconv.Itoa(trial)}
		n := 1 + rng.IntN(8)
		mentions := make([][]int64, n)
		for i := range n {
			for range rng.IntN(4) {
				mentions[i] = append(mentions[i], 1+rng.Int64N(12))
			}
		}
		order := kindtest.Replay(rng, n)
		var want []int64
		for _, i := range order {
			want = channel.MergeMentions(want, mentions[i], capN)
			_, err := s.WritePG(ctx, []channel.Mentions{{Key: k, Seqs: mentions[i]}})
			require.NoError(t, err)
			if rng.IntN(3) == 0 { // trims at random moments change no answer
				_, err = s.TrimPG(ctx, []receipt.Key{k})
				require.NoError(t, err)
			}
		}
		got, err := s.ReadPG(ctx, k.User, []string{k.Channel})
		require.NoError(t, err)
		if want == nil {
			require.Empty(t, got)
			continue
		}
		require.Equal(t, []channel.Mentions{{Key: k, Seqs: want}}, got, "trial %d", trial)
		_, err = s.TrimPG(ctx, []receipt.Key{k})
		require.NoError(t, err)
		var left int
		require.NoError(t, pg.Pool().QueryRow(ctx, `SELECT count(*) FROM mentions WHERE user_id = $1 AND channel_id = $2`, k.User, k.Channel).Scan(&left))
		require.Equal(t, len(want), left, "the trim keeps exactly the newest cap+1")
	}
}

// Postgres' reads take each key's newest cap+1: a user's channels, a
// range of them, the sweep's walk in key order; a bounded CHECK rejects a
// bad seq (the persister dead-letters it); an erasure deletes the user's
// rows only, by the kind's statement in the driver's transaction.
func TestPostgresReadsWalksRejectsAndErases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	s := NewStore(pg, nil).WithMentionCap(2)
	_, err := s.WritePG(ctx, []channel.Mentions{
		{Key: receipt.Key{User: "u1", Channel: "a"}, Seqs: []int64{1, 2, 3, 4, 5}},
		{Key: receipt.Key{User: "u1", Channel: "b"}, Seqs: []int64{9}},
		{Key: receipt.Key{User: "u2", Channel: "a"}, Seqs: []int64{7}},
	})
	require.NoError(t, err)
	mp, err := s.PagePG(ctx, receipt.Key{User: "u1", Channel: "a"}, 10)
	require.NoError(t, err)
	require.Equal(t, []channel.Mentions{{Key: receipt.Key{User: "u1", Channel: "b"}, Seqs: []int64{9}}, {Key: receipt.Key{User: "u2", Channel: "a"}, Seqs: []int64{7}}}, mp)
	mp, err = s.PagePG(ctx, receipt.Key{}, 1)
	require.NoError(t, err)
	require.Equal(t, []channel.Mentions{{Key: receipt.Key{User: "u1", Channel: "a"}, Seqs: []int64{3, 4, 5}}}, mp, "newest cap+1")
	mine, err := s.ReadPG(ctx, "u1", nil)
	require.NoError(t, err)
	require.Len(t, mine, 2)
	ranged, err := s.RangePG(ctx, "u1", "a", "")
	require.NoError(t, err)
	require.Equal(t, []channel.Mentions{{Key: receipt.Key{User: "u1", Channel: "b"}, Seqs: []int64{9}}}, ranged, "after a, to the last")
	ranged, err = s.RangePG(ctx, "u1", "", "a")
	require.NoError(t, err)
	require.Equal(t, []channel.Mentions{{Key: receipt.Key{User: "u1", Channel: "a"}, Seqs: []int64{3, 4, 5}}}, ranged, "from the first, up to a")

	_, err = s.WritePG(ctx, []channel.Mentions{{Key: receipt.Key{User: "u", Channel: "x"}, Seqs: []int64{-1}}})
	require.ErrorIs(t, err, pgstore.ErrRejected)

	deleted, _, err := pg.Erase(ctx, tombstone.Tombstone{User: "u1", Generation: 1, ErasedAtUnixMs: 1}, kind.PGErasure([]kind.Kind{Kind}))
	require.NoError(t, err)
	require.EqualValues(t, 6, deleted)
	mine, err = s.ReadPG(ctx, "u1", nil)
	require.NoError(t, err)
	require.Empty(t, mine)
	mine, err = s.ReadPG(ctx, "u2", nil)
	require.NoError(t, err)
	require.Len(t, mine, 1, "another user is untouched")
}
