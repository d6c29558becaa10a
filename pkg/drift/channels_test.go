package drift_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/drift"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/views/unread"
)

const capN = 3

func newSweeper(t *testing.T, bd *bundle) *drift.Sweeper {
	t.Helper()
	sw, err := drift.New(drift.Config{Postgres: bd.pg, Redis: bd.rs, PageSize: 2, PagesPerSecond: 10000, ScanCount: 3,
		Grace: time.Minute, MentionCap: capN, Registerer: bd.reg})
	require.NoError(t, err)
	return sw
}

// clockedSweeper is newSweeper with a clock the test moves: how far it is
// ahead of the wall clock.
func clockedSweeper(t *testing.T, bd *bundle) (*drift.Sweeper, *atomic.Int64) {
	t.Helper()
	sw := newSweeper(t, bd)
	ahead := new(atomic.Int64)
	drift.SetNow(sw, func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	return sw, ahead
}

// Drift of heads, membership registers and mentions, each way, is found
// and repaired with the merge rules; in-flight Redis heads are left; a
// second sweep finds nothing.
func TestSweepRepairsChannelStateBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	now := time.Now().UnixMilli()
	h := func(ch string, seq, ts int64) channel.Head {
		return channel.Head{Channel: ch, Seq: seq, MessageID: "m" + itoa(seq), UpdatedAtUnixMs: ts}
	}
	_, err := headkind.NewStore(bd.pg, nil).WritePG(ctx, []channel.Head{h("pg-ahead", 10, 1000), h("rd-ahead", 3, 1000), h("rd-missing", 7, 1000), h("same", 4, 1000), h("in-flight", 2, 1000)})
	require.NoError(t, err)
	_, err = headkind.NewStore(nil, bd.rs).RaiseRedis(ctx, []channel.Head{h("pg-ahead", 5, 1000), h("rd-ahead", 12, 1000), h("pg-missing", 6, 1000), h("same", 4, 1000), h("in-flight", 9, now)})
	require.NoError(t, err)

	k := func(u string) receipt.Key { return receipt.Key{User: u, Channel: "g"} }
	_, err = members.NewStore(bd.pg, nil).WritePG(ctx, []channel.Membership{
		channel.Leave(k("pg-ahead"), 9, 2000), channel.Join(k("rd-ahead"), 1, 1000, 1),
		channel.Join(k("rd-missing"), 2, 1000, 2), channel.Join(k("cm-lost"), 3, 1000, 3),
	})
	require.NoError(t, err)
	_, err = members.NewStore(nil, bd.rs).MergeMemberships(ctx, []channel.Membership{
		channel.Join(k("pg-ahead"), 5, 1000, 5), channel.Leave(k("rd-ahead"), 4, 1500),
		channel.Join(k("pg-missing"), 2, 1000, 2), channel.Join(k("cm-lost"), 3, 1000, 3),
	})
	require.NoError(t, err)
	require.NoError(t, bd.rs.Client().HDel(ctx, members.NewStore(nil, bd.rs).ChannelMembersKey("g"), "cm-lost").Err())

	mk := func(u string) receipt.Key { return receipt.Key{User: u, Channel: "m"} }
	ms := mentions.NewStore(bd.pg, bd.rs).WithMentionCap(capN)
	_, err = ms.WritePG(ctx, []channel.Mentions{{Key: mk("pg-ahead"), Seqs: []int64{1, 2, 3, 4, 5}}, {Key: mk("rd-ahead"), Seqs: []int64{5}}, {Key: mk("rd-missing"), Seqs: []int64{8}}})
	require.NoError(t, err)
	require.NoError(t, ms.AddRedis(ctx, []channel.Mentions{{Key: mk("pg-ahead"), Seqs: []int64{1}}, {Key: mk("rd-ahead"), Seqs: []int64{5, 6, 9}}, {Key: mk("pg-missing"), Seqs: []int64{2}}}))

	sw, clock := clockedSweeper(t, bd)
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	// Mentions carry no time: what Redis holds ahead of Postgres may be in
	// flight (the persister has not written it yet), until passes have
	// found it ahead for the grace.
	require.Equal(t, 1+2, rep.InFlight, "a head within the grace, two mention sets seen ahead once")
	require.Equal(t, drift.Counts{RedisAhead: 1, PostgresAhead: 1, RedisMissing: 1, PostgresMissing: 1}, *rep.ByKind[drift.KindHeads])
	require.Equal(t, drift.Counts{RedisAhead: 1, PostgresAhead: 1, RedisMissing: 2, PostgresMissing: 1}, *rep.ByKind[drift.KindMembers], "cm-lost counts as redis missing")
	require.Equal(t, drift.Counts{PostgresAhead: 1, RedisMissing: 1}, *rep.ByKind[drift.KindMentions])
	require.Equal(t, rep.Found, rep.Repaired)
	require.Zero(t, rep.Failed)
	pgm, err := ms.ReadPG(ctx, "pg-missing", []string{"m"})
	require.NoError(t, err)
	require.Empty(t, pgm, "left to the persister")
	inflight, err := headkind.NewStore(bd.pg, nil).ReadPG(ctx, []string{"in-flight"})
	require.NoError(t, err)
	require.Equal(t, int64(2), inflight[0].Seq, "a head Redis raised within the grace is left to the persister")

	clock.Store(int64(time.Minute)) // still ahead a grace later: drift
	rep, err = sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{RedisAhead: 1, PostgresMissing: 1}, *rep.ByKind[drift.KindMentions])
	require.Equal(t, drift.Counts{RedisAhead: 1}, *rep.ByKind[drift.KindHeads], "the in-flight head, a grace later")
	require.Equal(t, rep.Found, rep.Repaired)

	for ch, want := range map[string]int64{"pg-ahead": 10, "rd-ahead": 12, "rd-missing": 7, "pg-missing": 6, "same": 4} {
		pg, err := headkind.NewStore(bd.pg, nil).ReadPG(ctx, []string{ch})
		require.NoError(t, err)
		require.Equal(t, want, pg[0].Seq, ch)
		rd, err := headkind.NewStore(nil, bd.rs).ReadRedis(ctx, []string{ch})
		require.NoError(t, err)
		require.Equal(t, want, rd[ch].Seq, ch)
	}

	for u, want := range map[string]channel.Membership{
		"pg-ahead": channel.Leave(k("pg-ahead"), 9, 2000), "rd-ahead": channel.Leave(k("rd-ahead"), 4, 1500),
		"rd-missing": channel.Join(k("rd-missing"), 2, 1000, 2), "pg-missing": channel.Join(k("pg-missing"), 2, 1000, 2),
		"cm-lost": channel.Join(k("cm-lost"), 3, 1000, 3),
	} {
		pg, err := members.NewStore(bd.pg, nil).ReadPG(ctx, u, []string{"g"})
		require.NoError(t, err)
		require.Equal(t, []channel.Membership{want}, pg, u)
		um, _, err := members.NewStore(nil, bd.rs).Memberships(ctx, u, []string{"g"})
		require.NoError(t, err)
		require.Equal(t, []channel.Membership{want}, um, u)
		cm, _, err := members.NewStore(nil, bd.rs).ChannelMembers(ctx, "g", []string{u})
		require.NoError(t, err)
		require.Equal(t, []channel.Membership{want}, cm, u)
	}
	n, err := members.NewStore(bd.pg, nil).CountPG(ctx, "g")
	require.NoError(t, err)
	require.EqualValues(t, 3, n)

	for u, want := range map[string][]int64{"pg-ahead": {2, 3, 4, 5}, "rd-ahead": {5, 6, 9}, "rd-missing": {8}, "pg-missing": {2}} {
		pg, err := ms.ReadPG(ctx, u, []string{"m"})
		require.NoError(t, err)
		require.Equal(t, []channel.Mentions{{Key: mk(u), Seqs: want}}, pg, u)
		rd, err := ms.ReadRedis(ctx, []receipt.Key{mk(u)})
		require.NoError(t, err)
		require.Equal(t, want, rd[0], u)
	}

	again, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, again.Found.Total(), "%+v", again.ByKind)
}

// unreadOf reads a user's counts from Redis, hydrating from Postgres the
// way the gateway's read path does when Redis lost its state.
func unreadOf(t *testing.T, bd *bundle, user string, channels []string, hydrate bool) map[string]string {
	t.Helper()
	ctx := context.Background()
	if hydrate {
		cur, err := cursors.NewPostgres(bd.pg).Get(ctx, user, nil)
		require.NoError(t, err)
		require.NoError(t, cursors.NewStore(bd.rs).Hydrate(ctx, user, cur, redisstore.Incarnation{}))
		regs, err := members.NewStore(bd.pg, nil).ReadPG(ctx, user, nil)
		require.NoError(t, err)
		ms := mentions.NewStore(bd.pg, bd.rs).WithMentionCap(capN)
		mn, err := ms.ReadPG(ctx, user, nil)
		require.NoError(t, err)
		require.NoError(t, ms.HydrateRedis(ctx, user, mn))
		require.NoError(t, members.NewStore(nil, bd.rs).HydrateMemberships(ctx, user, regs))
	}
	view, err := unread.NewStore(nil, bd.rs).WithMentionCap(capN).Read(ctx, user, channels)
	require.NoError(t, err)
	if hydrate {
		heads, err := headkind.NewStore(bd.pg, nil).ReadPG(ctx, view.MissingHeads)
		require.NoError(t, err)
		var none []string
		for _, ch := range view.MissingHeads {
			if !containsHead(heads, ch) {
				none = append(none, ch)
			}
		}
		require.NoError(t, headkind.NewStore(nil, bd.rs).HydrateRedis(ctx, heads, none))
		view, err = unread.NewStore(nil, bd.rs).WithMentionCap(capN).Read(ctx, user, channels)
		require.NoError(t, err)
		require.True(t, view.CursorsComplete)
		require.True(t, view.MembershipsComplete)
		require.Empty(t, view.MissingHeads)
	}
	out := map[string]string{}
	for _, cv := range view.Channels {
		out[cv.Channel] = fmt.Sprintf("head %d read %v unread %d first %d mentions %d capped %v member %v",
			cv.Head.Seq, cv.State.EffectiveRead(), cv.Unread, cv.FirstUnread, cv.Mentions, cv.MentionsCapped, cv.Membership.Member)
	}
	return out
}

func containsHead(hs []channel.Head, ch string) bool {
	for _, h := range hs {
		if h.Channel == ch {
			return true
		}
	}
	return false
}

// After Redis loses everything (FLUSHALL), the hydrate path — and, on its
// own, the drift sweep — restore heads, memberships, mentions and cursors,
// so every count is exact again.
func TestFlushallThenHydrateOrSweepRestoresCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	const user = "alice"
	var heads []channel.Head
	var regs []channel.Membership
	var states []receipt.State
	var mns []channel.Mentions
	for c := range 6 {
		ch := fmt.Sprintf("c%d", c)
		key := receipt.Key{User: user, Channel: ch}
		heads = append(heads, channel.Head{Channel: ch, Seq: int64(20 + c), UpdatedAtUnixMs: 1000})
		regs = append(regs, channel.Join(key, 2, 1000, 2))
		st := receipt.State{Key: key, Read: receipt.Cursor{Position: receipt.Position{Seq: int64(3 + c)}}, DeviceID: "d", UpdatedAtUnixMs: 1000}
		if c%2 == 0 {
			st.PrivateRead = receipt.Cursor{Position: receipt.Position{Seq: int64(10 + c)}}
		}
		if c == 3 { // marked unread from 2: epoch 1, seq 1
			st.Read = receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: 1}}
		}
		states = append(states, st)
		mns = append(mns, channel.Mentions{Key: key, Seqs: []int64{2, 9, 12, 15, 18}})
	}
	regs[5] = channel.Leave(regs[5].Key, 30, 2000)
	// Both stores hold the same, as the write path leaves them.
	_, err := headkind.NewStore(bd.pg, nil).WritePG(ctx, heads)
	require.NoError(t, err)
	_, err = members.NewStore(bd.pg, nil).WritePG(ctx, regs)
	require.NoError(t, err)
	_, err = cursors.NewPostgres(bd.pg).Upsert(ctx, states)
	require.NoError(t, err)
	ms := mentions.NewStore(bd.pg, bd.rs).WithMentionCap(capN)
	_, err = ms.WritePG(ctx, mns)
	require.NoError(t, err)
	_, err = headkind.NewStore(nil, bd.rs).RaiseRedis(ctx, heads)
	require.NoError(t, err)
	_, err = members.NewStore(nil, bd.rs).MergeMemberships(ctx, regs)
	require.NoError(t, err)
	_, err = cursors.NewStore(bd.rs).Merge(ctx, states)
	require.NoError(t, err)
	require.NoError(t, ms.AddRedis(ctx, mns))

	before := unreadOf(t, bd, user, nil, false)
	require.Len(t, before, 5, "the left channel does not count")
	require.Equal(t, "head 23 read {1 1} unread 22 first 2 mentions 4 capped true member true", before["c3"], "mark-unread makes the kept mentions count again")
	require.Equal(t, "head 20 read {0 10} unread 10 first 11 mentions 3 capped false member true", before["c0"], "the private read counts")

	// FLUSHALL, as far as this test's keys go.
	flush := func() {
		redistest.DeletePrefix(ctx, bd.rs.Client().(*redis.Client), bd.rs.Prefix())
		view, err := unread.NewStore(nil, bd.rs).WithMentionCap(capN).Read(ctx, user, nil)
		require.NoError(t, err)
		require.Empty(t, view.Channels)
		require.False(t, view.CursorsComplete)
	}
	flush()
	require.Equal(t, before, unreadOf(t, bd, user, nil, true), "the hydrate path restores every count")

	flush()
	rep, err := newSweeper(t, bd).SweepOnce(ctx)
	require.NoError(t, err)
	require.Positive(t, rep.ByKind[drift.KindHeads].RedisMissing)
	require.Positive(t, rep.ByKind[drift.KindMembers].RedisMissing)
	require.Positive(t, rep.ByKind[drift.KindMentions].RedisMissing)
	require.Equal(t, before, unreadOf(t, bd, user, nil, false), "the sweep alone restores every count")
}

// A mention set that Redis holds ahead with a new value at each pass (a
// hot key under a lagging persister) stays in flight; once its value
// stays the same for the grace, it is repaired.
func TestMentionsAheadWithNewValuesStayInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	hot := receipt.Key{User: "hot", Channel: "m"}
	ms := mentions.NewStore(bd.pg, bd.rs).WithMentionCap(capN)
	sw, clock := clockedSweeper(t, bd)
	for seq := int64(1); seq <= 3; seq++ {
		require.NoError(t, ms.AddRedis(ctx, []channel.Mentions{{Key: hot, Seqs: []int64{seq}}}))
		rep, err := sw.SweepOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, rep.InFlight, "pass %d: a new mention since the last pass is in flight", seq)
		require.Zero(t, rep.Repaired, "pass %d", seq)
		clock.Add(int64(40 * time.Second)) // each pass over half a grace after the last
	}
	clock.Add(int64(40 * time.Second)) // the same value, a grace (80 s) after it was first seen
	rep, err := sw.SweepOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, drift.Counts{PostgresMissing: 1}, *rep.ByKind[drift.KindMentions])
	pg, err := ms.ReadPG(ctx, "hot", []string{"m"})
	require.NoError(t, err)
	require.Equal(t, []channel.Mentions{{Key: hot, Seqs: []int64{1, 2, 3}}}, pg)
}
