package members_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/views/readby"
)

// newRedisStore is the kind's store on a Redis of the test's own prefix
// (no Postgres), and that driver.
func newRedisStore(t *testing.T) (members.Store, *redisstore.Store) {
	t.Helper()
	rs := kindtest.Redis(t, members.Scripts...)
	return members.NewStore(nil, rs), rs
}

// erase erases user as the gateway does, with the kind's part of it (its
// user hash, and its register in each channel) and the read-by view's.
func erase(t *testing.T, rs *redisstore.Store, user string, nowMs int64) {
	t.Helper()
	env := &kind.Env{Redis: rs}
	ks := []kind.Kind{members.Kind}
	_, err := rs.Erase(context.Background(), user, nowMs, 0, kind.ErasedHashes(ks, env, user), readby.NewStore(nil, rs).Redact(nowMs, kind.RedisRedact(ks, env)))
	require.NoError(t, err)
}

// The membership registers in Lua agree with the Go rule: random
// registers in random orders with duplicates end where the Go fold does,
// and the member count follows the transitions.
func TestMembershipScriptsMatchTheRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newRedisStore(t)
	rng := rand.New(rand.NewPCG(9, 10))
	bases := []int64{0, 60, 1<<53 - 5, math.MaxInt64 - 40}
	for trial := range 60 {
		base := bases[trial%len(bases)]
		ch := "c" + strconv.Itoa(trial)
		k := receipt.Key{User: "u" + strconv.Itoa(trial%5), Channel: ch}
		n := 1 + rng.IntN(8)
		regs := make([]channel.Membership, n)
		for i := range n {
			regs[i] = channel.Membership{Key: k, Member: rng.IntN(2) == 0, VersionSeq: base + rng.Int64N(4), VersionUnixMs: 1 + rng.Int64N(3), JoinSeq: rng.Int64N(3)}
		}
		order := kindtest.Replay(rng, n)
		var wantReg channel.Membership
		for _, i := range order {
			var changed bool
			wantReg, changed = channel.MergeMembership(wantReg, regs[i])
			mr, err := s.MergeMemberships(ctx, []channel.Membership{regs[i]})
			require.NoError(t, err)
			require.NoError(t, mr[0].Err)
			require.Equal(t, changed, mr[0].Changed)
			require.Equal(t, wantReg, mr[0].Membership, "trial %d", trial)
			wantCount := int64(0)
			if wantReg.Member {
				wantCount = 1
			}
			require.Equal(t, wantCount, mr[0].MemberCount, "the count follows the transitions")
		}
		cm, _, err := s.ChannelMembers(ctx, ch, nil)
		require.NoError(t, err)
		require.Equal(t, []channel.Membership{wantReg}, cm)
	}
}

// The member count is kept on transitions and rebuilt by a hydrate after
// the channel's hash is lost; the scan finds every user's hash.
func TestMemberCountHydrateAndScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rs := newRedisStore(t)
	var regs []channel.Membership
	for i := range 600 {
		regs = append(regs, channel.Join(receipt.Key{User: "m" + strconv.Itoa(i), Channel: "big"}, 1, 1, 1))
	}
	_, err := s.MergeMemberships(ctx, regs)
	require.NoError(t, err)
	_, err = s.MergeMemberships(ctx, []channel.Membership{channel.Leave(receipt.Key{User: "m0", Channel: "big"}, 2, 2)})
	require.NoError(t, err)
	n, complete, err := s.MemberCount(ctx, "big")
	require.NoError(t, err)
	require.EqualValues(t, 599, n)
	require.False(t, complete)

	require.NoError(t, rs.Client().Del(ctx, s.ChannelMembersKey("big")).Err())
	_, err = s.MergeMemberships(ctx, []channel.Membership{channel.Join(receipt.Key{User: "late", Channel: "big"}, 3, 3, 3)})
	require.NoError(t, err)
	regs[0] = channel.Leave(receipt.Key{User: "m0", Channel: "big"}, 2, 2)
	require.NoError(t, s.HydrateChannelMembers(ctx, "big", regs[:300], false))
	require.NoError(t, s.HydrateChannelMembers(ctx, "big", regs[300:], true))
	n, complete, err = s.MemberCount(ctx, "big")
	require.NoError(t, err)
	require.EqualValues(t, 600, n, "599 hydrated members and the late joiner")
	require.True(t, complete)

	// Every page: the database is shared with other tests' keys.
	var users []string
	for cursor := (redisstore.ScanCursor{}); !cursor.Done(); {
		u, next, err := s.ScanMembershipUsers(ctx, cursor, 1000)
		require.NoError(t, err)
		users = append(users, u...)
		cursor = next
	}
	slices.Sort(users)
	require.Len(t, slices.Compact(users), 601)
}

// A join or leave is versioned by Redis: its time is Redis' clock, not
// the one the gateway proposed, and when the register stored is ahead of
// that (a version of a clock that ran ahead) the change goes one above
// it, so it always wins over what it read. Both hashes hold the result.
func TestChangeMembershipTakesItsVersionFromRedis(t *testing.T) {
	t.Parallel()
	s, _ := newRedisStore(t)
	ctx := context.Background()
	k := receipt.Key{User: "u", Channel: "c"}
	before := time.Now().Add(-time.Minute).UnixMilli()
	ahead := time.Now().Add(10 * time.Minute).UnixMilli()

	res := s.ChangeMembership(ctx, channel.Join(k, 3, ahead, 3))
	require.NoError(t, res.Err)
	require.True(t, res.Changed)
	require.Equal(t, redisstore.GenerationUnknown, res.Generation, "no tombstone in Redis")
	require.Greater(t, res.Membership.VersionUnixMs, before)
	require.Less(t, res.Membership.VersionUnixMs, ahead, "Redis' clock, not the proposed one")
	require.Equal(t, int64(3), res.Membership.VersionSeq)
	require.EqualValues(t, 1, res.MemberCount)

	// A register stored from a clock ahead: the leave goes above it.
	_, err := s.MergeMemberships(ctx, []channel.Membership{channel.Join(k, 3, ahead, 3)})
	require.NoError(t, err)
	res = s.ChangeMembership(ctx, channel.Leave(k, 3, 1))
	require.NoError(t, res.Err)
	require.Equal(t, channel.Leave(k, 3, ahead+1), res.Membership)
	require.Zero(t, res.MemberCount)
	byUser, _, err := s.Memberships(ctx, "u", []string{"c"})
	require.NoError(t, err)
	byChannel, _, err := s.ChannelMembers(ctx, "c", []string{"u"})
	require.NoError(t, err)
	require.Equal(t, []channel.Membership{channel.Leave(k, 3, ahead+1)}, byUser)
	require.Equal(t, byUser, byChannel)

	// A greater head orders by itself, at Redis' clock.
	res = s.ChangeMembership(ctx, channel.Join(k, 9, 1, 9))
	require.NoError(t, res.Err)
	require.Equal(t, int64(9), res.Membership.VersionSeq)
	require.Less(t, res.Membership.VersionUnixMs, ahead)
}

// A membership hash made by this build counts its left registers (":l")
// through merges in any order, API joins and leaves, hydration and
// erasure; a hash an older build made (no count) never gains a wrong one.
func TestLeftCountKeptByEveryWrite(t *testing.T) {
	t.Parallel()
	s, rs := newRedisStore(t)
	rdb := rs.Client()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(3, 4))
	leftIn := func(user string) (int, string) {
		all := rdb.HGetAll(ctx, s.UserMembersKey(user)).Val()
		n := 0
		for f, v := range all {
			if !strings.HasPrefix(f, ":") && strings.HasPrefix(v, "0") {
				n++
			}
		}
		return n, all[members.LeftCountField]
	}
	register := func(user string) channel.Membership {
		k := receipt.Key{User: user, Channel: fmt.Sprintf("c%d", rnd.IntN(12))}
		if rnd.IntN(2) == 0 {
			return channel.Leave(k, rnd.Int64N(5), rnd.Int64N(5))
		}
		return channel.Join(k, rnd.Int64N(5), rnd.Int64N(5), rnd.Int64N(3))
	}
	// An older build's hash: a left register and no count.
	require.NoError(t, rdb.HSet(ctx, s.UserMembersKey("old"), "c0", "0 1 1 0").Err())
	// A user hydrated with no register at all: the hash is made counted.
	require.NoError(t, s.HydrateMemberships(ctx, "empty", nil))
	for step := range 400 {
		for _, user := range []string{"u", "old", "empty"} {
			switch rnd.IntN(3) {
			case 0:
				_, err := s.MergeMemberships(ctx, []channel.Membership{register(user), register(user)})
				require.NoError(t, err)
			case 1:
				require.NoError(t, s.ChangeMembership(ctx, register(user)).Err)
			default:
				require.NoError(t, s.HydrateMemberships(ctx, user, []channel.Membership{register(user)}))
			}
			n, count := leftIn(user)
			if user == "old" {
				require.Empty(t, count, "step %d: an older build's hash has no count", step)
				continue
			}
			require.Equal(t, strconv.Itoa(n), count, "step %d", step)
		}
	}
	erase(t, rs, "u", time.Now().UnixMilli())
	n, count := leftIn("u")
	require.Equal(t, "0", count)
	require.Zero(t, n)
}

// An erasure takes the user's registers out of both hashes: the user's
// is left empty and complete (counting no left register), the user
// leaves each channel's hash the user's fields named, with the member
// count, and the registers' events after it read its generation; other
// users stay. Ids may hold ':', '%', '/', '#' and glob characters: the
// keys, fields and scans give them whole.
func TestEraseTakesTheUserOutOfBothHashes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rs := newRedisStore(t)
	const (
		gone = "@gone:example.org"
		kept = "urn:tenant:b%2F/#b"
		glob = "@gone:example.org*"
	)
	chs := []string{"!room:example.org", "c*2"}
	for _, u := range []string{gone, kept, glob} {
		for _, ch := range chs {
			mr, err := s.MergeMemberships(ctx, []channel.Membership{channel.Join(receipt.Key{User: u, Channel: ch}, 1, 1, 1)})
			require.NoError(t, err)
			require.NoError(t, mr[0].Err)
		}
	}
	require.NoError(t, s.HydrateMemberships(ctx, gone, nil))
	n, _, err := s.MemberCount(ctx, chs[0])
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	var users []string
	for cur := (redisstore.ScanCursor{}); !cur.Done(); {
		var page []string
		page, cur, err = s.ScanMembershipUsers(ctx, cur, 1000)
		require.NoError(t, err)
		users = append(users, page...)
	}
	require.ElementsMatch(t, []string{gone, kept, glob}, users)

	erase(t, rs, gone, 1_000)
	regs, complete, err := s.Memberships(ctx, gone, nil)
	require.NoError(t, err)
	require.Empty(t, regs)
	require.True(t, complete, "an erased user's hash is complete, so reads do not fall back to Postgres")
	require.Equal(t, map[string]string{redisstore.LoadedField: "1", members.LeftCountField: "0"}, rs.Client().HGetAll(ctx, s.UserMembersKey(gone)).Val())
	for _, ch := range chs {
		in, _, err := s.ChannelMembers(ctx, ch, nil)
		require.NoError(t, err)
		got := make([]string, len(in))
		for i, m := range in {
			got[i] = m.Key.User
		}
		require.ElementsMatch(t, []string{kept, glob}, got, "channel %s", ch)
		n, _, err := s.MemberCount(ctx, ch)
		require.NoError(t, err)
		require.EqualValues(t, 2, n, "the member count drops by the erased member")
	}
	for _, u := range []string{kept, glob} {
		regs, _, err := s.Memberships(ctx, u, nil)
		require.NoError(t, err)
		require.Len(t, regs, 2, u)
	}

	// A register after the erasure reads its generation; the user comes
	// back.
	res := s.ChangeMembership(ctx, channel.Join(receipt.Key{User: gone, Channel: chs[0]}, 2, 2, 2))
	require.NoError(t, res.Err)
	require.Equal(t, int64(1_000), res.Generation)
	n, _, err = s.MemberCount(ctx, chs[0])
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
}

// In Redis Cluster a register goes to two slots (the user's and the
// channel's), and an erasure cleans both.
func TestClusterMemberships(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	cfg := redisstore.ClientConfig{Mode: redisstore.ModeCluster, Addrs: c.Addrs[:1], Prefix: "receipts:"}
	require.NoError(t, cfg.Validate())
	rdb, err := cfg.NewClient()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	rs := redisstore.New(rdb, cfg.StoreConfig())
	require.NoError(t, rs.Load(ctx, members.Scripts...))
	s := members.NewStore(nil, rs)
	var regs []channel.Membership
	for i := range 30 {
		for _, u := range []string{"alice", "bob"} {
			regs = append(regs, channel.Join(receipt.Key{User: u, Channel: "ch" + strconv.Itoa(i)}, 1, 1, 2))
		}
	}
	mr, err := s.MergeMemberships(ctx, regs)
	require.NoError(t, err)
	for i, r := range mr {
		require.NoError(t, r.Err)
		require.EqualValues(t, 1+i%2, r.MemberCount)
	}
	byUser, byChannel, err := s.RegistersOf(ctx, []receipt.Key{regs[0].Key, regs[59].Key})
	require.NoError(t, err)
	require.Equal(t, []*channel.Membership{&regs[0], &regs[59]}, byUser)
	require.Equal(t, byUser, byChannel)

	erase(t, rs, "alice", 5)
	got, complete, err := s.Memberships(ctx, "alice", nil)
	require.NoError(t, err)
	require.Empty(t, got)
	require.True(t, complete)
	for i := range 30 {
		in, _, err := s.ChannelMembers(ctx, "ch"+strconv.Itoa(i), nil)
		require.NoError(t, err)
		require.Equal(t, []channel.Membership{regs[2*i+1]}, in)
	}
}
