package pgstore_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
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

// The SQL merges agree with the Go rules (receipt.Merge,
// channel.MergeMembership; the heads' are pkg/kinds/heads'): random events, one
// statement each in random order with duplicates, end with the state the
// Go fold computes.
func TestSQLMergesMatchTheRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 40 {
		ch := "c" + strconv.Itoa(trial)
		k := receipt.Key{User: "u" + strconv.Itoa(trial%7), Channel: ch}
		n := 1 + rng.IntN(8)
		states := make([]receipt.State, n)
		regs := make([]channel.Membership, n)
		for i := range n {
			states[i] = receipt.State{Key: k, Read: pos(rng.Int64N(3), rng.Int64N(20)), Delivered: pos(0, rng.Int64N(20)), DeviceID: "d", UpdatedAtUnixMs: 1000}
			if rng.IntN(2) == 0 {
				states[i].PrivateRead = receipt.Cursor{Position: receipt.Position{Epoch: rng.Int64N(3), Seq: rng.Int64N(25)}}
			}
			states[i], _ = receipt.Merge(receipt.State{}, states[i]) // as the persister writes a row
			if states[i].Validate() != nil {
				states[i].Delivered = pos(0, 1)
			}
			regs[i] = channel.Membership{Key: k, Member: rng.IntN(2) == 0, VersionSeq: rng.Int64N(4), VersionUnixMs: 1 + rng.Int64N(3), JoinSeq: rng.Int64N(3)}
		}
		order := rng.Perm(n)
		order = append(order, order[:rng.IntN(n+1)]...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

		var wantSt receipt.State
		var wantReg channel.Membership
		for _, i := range order {
			wantSt, _ = receipt.Merge(wantSt, states[i])
			wantReg, _ = channel.MergeMembership(wantReg, regs[i])

			_, err := s.Upsert(ctx, []receipt.State{states[i]})
			require.NoError(t, err)
			_, err = s.UpsertMembers(ctx, []channel.Membership{regs[i]})
			require.NoError(t, err)
		}
		got, err := s.Get(ctx, k.User, []string{ch})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.True(t, got[0].SameCursors(wantSt), "trial %d: %+v vs %+v", trial, got[0], wantSt)
		require.Equal(t, wantSt.Read, got[0].Read)
		require.Equal(t, wantSt.EffectiveRead(), got[0].EffectiveRead())

		m, err := s.Memberships(ctx, k.User, []string{ch})
		require.NoError(t, err)
		require.Equal(t, []channel.Membership{wantReg}, m, "trial %d", trial)
	}
}

func TestChannelReadsAndPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	var regs []channel.Membership
	for i := range 5 {
		regs = append(regs, channel.Join(receipt.Key{User: "u" + strconv.Itoa(i), Channel: "g"}, 1, 1, 1))
	}
	regs = append(regs, channel.Leave(receipt.Key{User: "u9", Channel: "g"}, 2, 2), channel.Join(receipt.Key{User: "u0", Channel: "h"}, 1, 1, 0))
	n, err := s.UpsertMembers(ctx, regs)
	require.NoError(t, err)
	require.EqualValues(t, 7, n)
	n, err = s.UpsertMembers(ctx, regs)
	require.NoError(t, err)
	require.Zero(t, n, "a replay changes nothing")

	count, err := s.MemberCount(ctx, "g")
	require.NoError(t, err)
	require.EqualValues(t, 5, count)
	page, err := s.ChannelMembers(ctx, "g", "u1", 2, true)
	require.NoError(t, err)
	require.Equal(t, regs[2:4], page)
	all, err := s.ChannelMembers(ctx, "g", "", 100, false)
	require.NoError(t, err)
	require.Len(t, all, 6)
	mine, err := s.Memberships(ctx, "u0", nil)
	require.NoError(t, err)
	require.Len(t, mine, 2)

	var walked []channel.Membership
	var after receipt.Key
	for {
		p, err := s.MembersPage(ctx, after, 3)
		require.NoError(t, err)
		if len(p) == 0 {
			break
		}
		walked = append(walked, p...)
		after = p[len(p)-1].Key
	}
	want := slices.Clone(regs)
	slices.SortFunc(want, pgstore.CompareMembers)
	require.Equal(t, want, walked)

	// A bounded CHECK rejects bad rows (the persister dead-letters them).
	_, err = s.UpsertMembers(ctx, []channel.Membership{{Key: receipt.Key{User: "u", Channel: "x"}, VersionSeq: -1}})
	require.ErrorIs(t, err, pgstore.ErrRejected)
}
