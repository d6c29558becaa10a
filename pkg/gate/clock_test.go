package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Two gateways on one Redis and one topic, the first with a clock ten
// minutes ahead: it erases a user, and every write the other gateway
// acknowledges for that user afterwards travels with what orders it
// after the erasure, so no consumer (tombstone.Drops, the rule of the
// persister, the dead-letter repair and the sweep) drops it, whatever
// the clocks say. And the other way round: the gateway ahead writes after
// the other one erased.
func TestAGatewayClockAheadLosesNothing(t *testing.T) {
	t.Parallel()
	ahead := func() time.Time { return time.Now().Add(10 * time.Minute) }
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Clock = ahead }})
	other := tb.cfg
	other.Clock = nil
	reg := prometheus.NewRegistry()
	other.Registerer, other.Server.Registerer, other.Durable.Registerer = reg, reg, reg
	_, _, otherURL, _ := startGate(t, other)
	fast := tb.client()
	slow := receiptsv1connect.NewReceiptServiceClient(tb.h2c, otherURL)
	ctx := context.Background()

	// writes makes every kind of write of user through c, all acknowledged.
	writes := func(c receiptsv1connect.ReceiptServiceClient, user string) {
		t.Helper()
		_, err := c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: user, ChannelId: "c1", Seq: 5, DeviceId: "d"}))
		require.NoError(t, err)
		_, err = c.MarkUnread(ctx, connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: user, ChannelId: "c1", Seq: 3, DeviceId: "d"}))
		require.NoError(t, err)
		_, err = c.JoinChannel(ctx, connect.NewRequest(&receiptsv1.JoinChannelRequest{UserId: user, ChannelId: "c2"}))
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		user          string
		eraser, later receiptsv1connect.ReceiptServiceClient
	}{{"u-ahead-erases", fast, slow}, {"u-behind-erases", slow, fast}} {
		writes(tc.eraser, tc.user) // before the erasure: dropped
		_, err := tc.eraser.EraseUser(ctx, connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: tc.user}))
		require.NoError(t, err)
		writes(tc.later, tc.user) // after it: kept
	}

	// Read the topic: per user, the erasure and the events after it.
	cl := tb.broker.Client(t, kgo.ConsumeTopics(tb.broker.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tombs := tombstone.Set{}
	var decoded []event.Decoded
	for len(decoded) < 2*(3+1+3) {
		fs := cl.PollFetches(pctx)
		require.NoError(t, pctx.Err(), "have %d records", len(decoded))
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetching %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			d, err := event.DecodeRecord(r)
			require.NoError(t, err)
			if d.Erasure != nil {
				tombs.Add(*d.Erasure)
			}
			decoded = append(decoded, d)
		})
	}
	require.Len(t, tombs, 2)
	kept := map[string]int{}
	for _, d := range decoded {
		if d.Erasure == nil && !tombs.Drops(d.User(), d.Generation, d.AcceptedAt()) {
			kept[d.User()]++
		}
	}
	// Records of one key keep their order, but the erasure has a key of
	// its own: what is kept is told by the events alone.
	require.Equal(t, map[string]int{"u-ahead-erases": 3, "u-behind-erases": 3}, kept,
		"every write after the erasure, and none before it, survives it")
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
	_, _, err = tb.schema.Store.Erase(ctx, ts) // the persister applied it
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
		require.False(t, tombs.Drops("u", d.Generation, d.AcceptedAt()))
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
