package gate_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/tombstone"
	"github.com/readstate/receipts/pkg/views/readby"
)

// clockPair is two gateways on one Redis, one Postgres and one topic, the
// first with a clock ten minutes ahead.
type clockPair struct {
	tb         *testBundle
	fast, slow receiptsv1connect.ReceiptServiceClient
}

func newClockPair(t *testing.T) clockPair {
	ahead := func() time.Time { return time.Now().Add(10 * time.Minute) }
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Clock = ahead }})
	other := tb.cfg
	other.Clock = nil
	reg := prometheus.NewRegistry()
	other.Registerer, other.Server.Registerer, other.Durable.Registerer = reg, reg, reg
	_, _, otherURL, _ := startGate(t, other)
	return clockPair{tb: tb, fast: tb.client(), slow: receiptsv1connect.NewReceiptServiceClient(tb.h2c, otherURL)}
}

// writeEveryKind makes one acknowledged write of every kind of user's
// state through c, at seqs from base: a read, a private read, a
// mark-unread, a join and a leave, a notice the user sent that mentions
// them (the sender's read and the mention set) and a settings change. It
// returns how many user events they produce.
func writeEveryKind(t *testing.T, c receiptsv1connect.ReceiptServiceClient, user string, base int64) int {
	t.Helper()
	ctx := context.Background()
	_, err := c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: user, ChannelId: "c1", Seq: base + 5, DeviceId: "d"}))
	require.NoError(t, err)
	_, err = c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: user, ChannelId: "c1", Seq: base + 6, DeviceId: "d", Private: true}))
	require.NoError(t, err)
	_, err = c.MarkUnread(ctx, connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: user, ChannelId: "c1", Seq: base + 3, DeviceId: "d"}))
	require.NoError(t, err)
	_, err = c.JoinChannel(ctx, connect.NewRequest(&receiptsv1.JoinChannelRequest{UserId: user, ChannelId: "c2"}))
	require.NoError(t, err)
	_, err = c.LeaveChannel(ctx, connect.NewRequest(&receiptsv1.LeaveChannelRequest{UserId: user, ChannelId: "c2"}))
	require.NoError(t, err)
	_, err = c.NotifyMessage(ctx, connect.NewRequest(&receiptsv1.NotifyMessageRequest{ChannelId: "c3-" + user, Seq: base + 7,
		SenderId: user, Mentions: []string{user}}))
	require.NoError(t, err)
	share := base%2 == 0
	_, err = c.UpdateSettings(ctx, connect.NewRequest(&receiptsv1.UpdateSettingsRequest{UserId: user, ShareReadReceipts: &share}))
	require.NoError(t, err)
	return 8
}

// userEvents reads the topic from the start until it has n events of
// users (erasures included; channel events are left out), and the
// erasures' tombstones.
func userEvents(t *testing.T, tb *testBundle, n int) ([]event.Decoded, tombstone.Set) {
	t.Helper()
	var users []event.Decoded
	tb.decodedUntil(t, func(all []event.Decoded) bool {
		users = users[:0]
		for _, d := range all {
			if d.User() != "" {
				users = append(users, d)
			}
		}
		return len(users) >= n
	})
	tombs := tombstone.Set{}
	for _, d := range users {
		if d.Erasure != nil {
			tombs.Add(*d.Erasure)
		}
	}
	return users, tombs
}

// Two gateways, the first with a clock ten minutes ahead. Each erases a
// user after both wrote every kind of the user's state, and both write
// every kind again after it: every write after the erasure travels with
// what orders it after the erasure, and every write before with what
// orders it before, so the rule of every consumer (tombstone.Drops: the
// persister, the dead-letter repair) keeps exactly the later ones,
// whatever the clocks say — the gateway ahead's earlier writes are not
// taken for later ones, nor the other's later writes for earlier ones.
func TestAGatewayClockAheadLosesNothing(t *testing.T) {
	t.Parallel()
	p := newClockPair(t)
	ctx := context.Background()
	events := 0
	for _, tc := range []struct {
		user   string
		eraser receiptsv1connect.ReceiptServiceClient
	}{{"u-ahead-erases", p.fast}, {"u-behind-erases", p.slow}} {
		events += writeEveryKind(t, p.fast, tc.user, 0) // before the erasure: dropped
		events += writeEveryKind(t, p.slow, tc.user, 10)
		_, err := tc.eraser.EraseUser(ctx, connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: tc.user}))
		require.NoError(t, err)
		events++
		events += writeEveryKind(t, p.fast, tc.user, 20) // after it: kept
		events += writeEveryKind(t, p.slow, tc.user, 30)
	}

	decoded, tombs := userEvents(t, p.tb, events)
	require.Len(t, tombs, 2)
	type count struct{ kept, dropped int }
	got := map[string]count{}
	for _, d := range decoded {
		if d.Erasure != nil {
			continue
		}
		require.True(t, d.Stamped, "every write of a gateway with Redis is stamped: %+v", d)
		c := got[d.User()]
		if tombs.Drops(d.User(), d.Generation, d.Stamped, d.AcceptedAt()) {
			c.dropped++
		} else {
			c.kept++
		}
		got[d.User()] = c
	}
	// Records of one key keep their order, but the erasure has a key of
	// its own: what is kept is told by the events alone.
	want := count{kept: 16, dropped: 16}
	require.Equal(t, map[string]count{"u-ahead-erases": want, "u-behind-erases": want}, got,
		"every write after the erasure, and none before it, survives it")
}

// A join/leave race is not decided by a gateway's clock: the gateway
// ahead joins, Redis loses the register (a FLUSHALL, before Postgres has
// it), and the other gateway's leave still orders after the join, in
// every store that merges the two events.
func TestAGatewayClockAheadDoesNotWinMembership(t *testing.T) {
	t.Parallel()
	p := newClockPair(t)
	ctx := context.Background()
	_, err := p.fast.JoinChannel(ctx, connect.NewRequest(&receiptsv1.JoinChannelRequest{UserId: "u", ChannelId: "c"}))
	require.NoError(t, err)
	keys := p.tb.redisKeys(t)
	require.NotEmpty(t, keys)
	require.NoError(t, p.tb.rdb.Del(ctx, keys...).Err())
	_, err = p.slow.LeaveChannel(ctx, connect.NewRequest(&receiptsv1.LeaveChannelRequest{UserId: "u", ChannelId: "c"}))
	require.NoError(t, err)

	decoded, _ := userEvents(t, p.tb, 2)
	var regs []channel.Membership
	for _, d := range decoded {
		require.NotNil(t, d.Membership)
		regs = append(regs, *d.Membership)
	}
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		m, _ := channel.MergeMembership(regs[order[0]], regs[order[1]])
		m, _ = channel.MergeMembership(channel.Membership{}, m)
		require.False(t, m.Member, "the later leave wins, merged in order %v: %+v", order, regs)
	}
	// Redis ordered it the same way.
	got, _, err := members.NewStore(nil, p.tb.store).Memberships(ctx, "u", []string{"c"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.False(t, got[0].Member)
}

// An erasure acknowledged by the gateway ahead, then Redis loses its data
// (a FLUSHALL) before any persister applied it: the other gateway's later
// writes are still stamped with the erasure's generation (Postgres holds
// every acknowledged erasure), so none is dropped, though they were
// accepted well within the erasure's time by its clock.
func TestAnErasureRedisLostBeforeThePersisterStillOrdersWrites(t *testing.T) {
	t.Parallel()
	p := newClockPair(t)
	ctx := context.Background()
	resp, err := p.fast.EraseUser(ctx, connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: "u"}))
	require.NoError(t, err)
	keys := p.tb.redisKeys(t)
	require.NotEmpty(t, keys)
	require.NoError(t, p.tb.rdb.Del(ctx, keys...).Err())
	n := 1 + writeEveryKind(t, p.slow, "u", 0)

	decoded, tombs := userEvents(t, p.tb, n)
	require.Equal(t, resp.Msg.GetGeneration(), tombs["u"].Generation)
	for _, d := range decoded {
		if d.Erasure != nil {
			continue
		}
		require.Equal(t, resp.Msg.GetGeneration(), d.Generation, "stamped with the erasure Redis lost: %+v", d)
		require.False(t, tombs.Drops("u", d.Generation, d.Stamped, d.AcceptedAt()), "%+v", d)
	}
	// The next erasure goes above it, though Redis forgot it and this
	// gateway's clock is ten minutes behind its generation.
	again, err := p.slow.EraseUser(ctx, connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: "u"}))
	require.NoError(t, err)
	require.Greater(t, again.Msg.GetGeneration(), resp.Msg.GetGeneration())
}

// A Redis that lost its data (a FLUSHALL) lost the tombstones too: the
// writes that follow an erasure are then stamped with the generation of
// the user's tombstone in Postgres, read once and remembered in Redis,
// never with 0 (which the time rule would judge by the clocks, dropping
// a write within the clock skew of the erasure).
func TestAStampAfterRedisLostTheTombstoneComesFromPostgres(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	c := tb.client()
	ctx := context.Background()
	resp, err := c.EraseUser(ctx, connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: "u"}))
	require.NoError(t, err)
	ts, err := tb.store.Tombstone(ctx, "u")
	require.NoError(t, err)
	require.Equal(t, resp.Msg.GetGeneration(), ts.Generation)
	_, _, err = tb.schema.Store.Erase(ctx, ts, kind.PGErasure(kinds.All()).And(readby.MoveLogErasure)) // the persister applied it
	require.NoError(t, err)
	// Redis loses everything of the test's prefix.
	keys := tb.redisKeys(t)
	require.NotEmpty(t, keys)
	require.NoError(t, tb.rdb.Del(ctx, keys...).Err())

	_, err = c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "u", ChannelId: "c1", Seq: 5}))
	require.NoError(t, err)
	_, err = c.MarkUnread(ctx, connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: "u", ChannelId: "c1", Seq: 3}))
	require.NoError(t, err)
	_, err = c.JoinChannel(ctx, connect.NewRequest(&receiptsv1.JoinChannelRequest{UserId: "u", ChannelId: "c2"}))
	require.NoError(t, err)
	_, err = c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "never", ChannelId: "c1", Seq: 5}))
	require.NoError(t, err)

	cl := tb.broker.Client(t, kgo.ConsumeTopics(tb.broker.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var after []event.Decoded
	for len(after) < 4 {
		fs := cl.PollFetches(pctx)
		require.NoError(t, pctx.Err(), "have %d records", len(after))
		fs.EachRecord(func(r *kgo.Record) {
			d, err := event.DecodeRecord(r)
			require.NoError(t, err)
			if d.Erasure == nil {
				after = append(after, d)
			}
		})
	}
	tombs := tombstone.Set{"u": ts}
	for _, d := range after {
		if d.User() == "never" {
			require.Zero(t, d.Generation, "never erased")
			continue
		}
		require.Equal(t, ts.Generation, d.Generation, "stamped with the erasure Postgres holds: %+v", d)
		require.False(t, tombs.Drops("u", d.Generation, d.Stamped, d.AcceptedAt()))
	}
	// Redis remembers: the erased user's tombstone as Postgres has it, and
	// that the other was never erased (for a while).
	got, err := tb.store.Tombstone(ctx, "u")
	require.NoError(t, err)
	require.Equal(t, ts, got)
	none, err := tb.store.Tombstone(ctx, "never")
	require.NoError(t, err)
	require.True(t, none.IsZero())
	ttl, err := tb.rdb.PTTL(ctx, tb.store.TombstoneKey("never")).Result()
	require.NoError(t, err)
	require.Positive(t, ttl)
	ttl, err = tb.rdb.PTTL(ctx, tb.store.TombstoneKey("u")).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "a real tombstone never expires")
}
