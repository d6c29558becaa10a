package members_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// randomMembership draws a register of few users and channels.
func randomMembership(r *rand.Rand) any {
	k := receipt.Key{User: "u" + strconv.Itoa(r.IntN(3)), Channel: "c" + strconv.Itoa(r.IntN(3))}
	return channel.Membership{Key: k, Member: r.IntN(2) == 0, VersionSeq: r.Int64N(4), VersionUnixMs: 1 + r.Int64N(3), JoinSeq: r.Int64N(3)}
}

// The kind passes the conformance suite: its rule obeys the merge laws,
// and write.sql and Redis keep what channel.MergeMembership keeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	env := kindtest.Env(t)
	kindtest.MergeLaws(t, members.Kind, env, randomMembership)
	kindtest.StoresAgree(t, members.Kind, env, randomMembership)
}

// write.sql agrees with channel.MergeMembership: random registers, one
// statement each in random order with duplicates, end with the register
// the Go fold computes.
func TestWriteMatchesTheRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := members.NewStore(pgtest.NewSchema(t).Store, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 40 {
		k := receipt.Key{User: "u" + strconv.Itoa(trial%7), Channel: "c" + strconv.Itoa(trial)}
		n := 1 + rng.IntN(8)
		regs := make([]channel.Membership, n)
		for i := range regs {
			regs[i] = channel.Membership{Key: k, Member: rng.IntN(2) == 0, VersionSeq: rng.Int64N(4), VersionUnixMs: 1 + rng.Int64N(3), JoinSeq: rng.Int64N(3)}
		}
		order := kindtest.Replay(rng, n)
		var want channel.Membership
		for _, i := range order {
			want, _ = channel.MergeMembership(want, regs[i])
			_, err := s.WritePG(ctx, []channel.Membership{regs[i]})
			require.NoError(t, err)
		}
		got, err := s.ReadPG(ctx, k.User, []string{k.Channel})
		require.NoError(t, err)
		require.Equal(t, []channel.Membership{want}, got, "trial %d", trial)
	}
}

func TestReadsAndPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := members.NewStore(pgtest.NewSchema(t).Store, nil)
	var regs []channel.Membership
	for i := range 5 {
		regs = append(regs, channel.Join(receipt.Key{User: "u" + strconv.Itoa(i), Channel: "g"}, 1, 1, 1))
	}
	regs = append(regs, channel.Leave(receipt.Key{User: "u9", Channel: "g"}, 2, 2), channel.Join(receipt.Key{User: "u0", Channel: "h"}, 1, 1, 0))
	n, err := s.WritePG(ctx, regs)
	require.NoError(t, err)
	require.EqualValues(t, 7, n)
	n, err = s.WritePG(ctx, regs)
	require.NoError(t, err)
	require.Zero(t, n, "a replay changes nothing")

	count, err := s.CountPG(ctx, "g")
	require.NoError(t, err)
	require.EqualValues(t, 5, count)
	page, err := s.ChannelPagePG(ctx, "g", "u1", 2, true)
	require.NoError(t, err)
	require.Equal(t, regs[2:4], page)
	all, err := s.ChannelPagePG(ctx, "g", "", 100, false)
	require.NoError(t, err)
	require.Len(t, all, 6)
	mine, err := s.ReadPG(ctx, "u0", nil)
	require.NoError(t, err)
	require.Len(t, mine, 2)

	var walked []channel.Membership
	var after receipt.Key
	for {
		p, err := s.PagePG(ctx, after, 3)
		require.NoError(t, err)
		if len(p) == 0 {
			break
		}
		walked = append(walked, p...)
		after = p[len(p)-1].Key
	}
	want := slices.Clone(regs)
	slices.SortFunc(want, members.Compare)
	require.Equal(t, want, walked)

	// A bounded CHECK rejects bad rows (the persister dead-letters them).
	_, err = s.WritePG(ctx, []channel.Membership{{Key: receipt.Key{User: "u", Channel: "x"}, VersionSeq: -1}})
	require.ErrorIs(t, err, pgstore.ErrRejected)
}
