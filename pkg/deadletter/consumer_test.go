package deadletter_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/parked"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

const waitFor = 30 * time.Second

func TestConsumerMergesRedisValueIntoPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	b := kafkatest.New(t)
	group := "reconciler-" + kafkatest.Suffix()

	// Key 1: Redis holds seq 10, Postgres nothing, the dead letter seq 5.
	// Key 2: Postgres is ahead (20) of Redis (7) and of the dead letter (5).
	k1, k2 := receipt.Key{User: "u1", Channel: "c1"}, receipt.Key{User: "u2", Channel: "c1"}
	_, err := cursors.NewStore(bd.rs).Merge(ctx, []receipt.State{state("u1", "c1", 10, true), state("u2", "c1", 7, true)})
	require.NoError(t, err)
	_, err = cursors.NewPostgres(bd.pg).Upsert(ctx, []receipt.State{state("u2", "c1", 20, true)})
	require.NoError(t, err)
	r1, r2 := encode(t, state("u1", "c1", 5, true)), encode(t, state("u2", "c1", 5, true))
	produce(t, b,
		dltRecord(b, r1.Key, r1.Value, 3, 41, "rejected by postgres: check"),
		dltRecord(b, r2.Key, r2.Value, 1, 7, "rejected by postgres: check"))

	c := startConsumer(t, bd, b, group, nil)
	require.Eventually(t, func() bool { return metric(t, bd.reg, "receipts_reconciler_reconciled_total") == 2 },
		waitFor, 20*time.Millisecond)

	got, ok := pgState(t, bd.pg, k1)
	require.True(t, ok)
	require.Equal(t, receipt.Position{Seq: 10}, got.Read.Position, "Postgres ends at the newer Redis value, not the record's")
	require.Equal(t, "m10", got.Read.MessageID)
	rd, _ := redisState(t, bd.rs, k1)
	require.Equal(t, int64(10), rd.Read.Position.Seq)

	got, _ = pgState(t, bd.pg, k2)
	require.Equal(t, int64(20), got.Read.Position.Seq, "Postgres never moves backwards")
	rd, _ = redisState(t, bd.rs, k2)
	require.Equal(t, int64(20), rd.Read.Position.Seq, "Redis converges to what Postgres holds")

	require.Eventually(t, func() bool { return committed(t, b, group, b.DLTTopic) == 2 }, waitFor, 20*time.Millisecond)
	require.Zero(t, metric(t, bd.reg, "receipts_reconciler_parked_total", "kind", deadletter.KindUndecodable))
	require.Eventually(t, func() bool { return c.Ready(ctx) == nil }, waitFor, 20*time.Millisecond)
}

func TestConsumerParksUndecodableRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	b := kafkatest.New(t)
	group := "reconciler-" + kafkatest.Suffix()

	badID := encode(t, state("bad user", "c1", 3, true)) // whitespace in the id
	ev := event.ToProto(state("u1", "c1", 3, true))
	ev.SchemaVersion = 99
	future, err := proto.Marshal(ev)
	require.NoError(t, err)
	recs := []*kgo.Record{
		dltRecord(b, []byte("u1:c1"), []byte{0xff, 0x00, 0x13, 0x37}, 2, 100, "undecodable record: garbage"),
		dltRecord(b, badID.Key, badID.Value, 3, 200, "undecodable record: invalid event"),
		dltRecord(b, []byte("u1:c1"), future, 0, 300, "undecodable record: \xff\x00 bad bytes"),
		// No dead-letter headers at all: the source is unknown.
		{Topic: b.DLTTopic, Partition: 0, Key: []byte("x"), Value: []byte("not protobuf")},
	}
	produce(t, b, recs...)

	startConsumer(t, bd, b, group, nil)
	require.Eventually(t, func() bool {
		return metric(t, bd.reg, "receipts_reconciler_parked_total", "kind", deadletter.KindUndecodable) == 4
	}, waitFor, 20*time.Millisecond)
	require.Eventually(t, func() bool { return committed(t, b, group, b.DLTTopic) == 4 }, waitFor, 20*time.Millisecond)

	parked, err := parked.New(bd.pg).List(ctx, parked.Query{})
	require.NoError(t, err)
	require.Len(t, parked, 4)
	want := []struct {
		partition int32
		offset    int64
		reason    string
	}{{2, 100, "unmarshalling protobuf"}, {3, 200, "invalid event"}, {0, 300, "unknown schema version 99"}, {-1, -1, "unmarshalling protobuf"}}
	for i, p := range parked {
		require.True(t, strings.HasPrefix(p.Reason, "undecodable: "), p.Reason)
		require.Contains(t, p.Reason, want[i].reason)
		require.Equal(t, want[i].partition, p.SourcePartition)
		require.Equal(t, want[i].offset, p.SourceOffset)
		require.Equal(t, recs[i].Key, p.Key)
		require.Equal(t, recs[i].Value, p.Value)
		require.Equal(t, 1, p.Attempts)
		require.Nil(t, p.ReplayedAt)
		if i < 3 {
			require.Equal(t, b.Topic, p.SourceTopic)
			require.Contains(t, p.Reason, "(dead-lettered for: undecodable record")
		} else {
			require.Empty(t, p.SourceTopic)
		}
	}
	n, err := cursors.NewPostgres(bd.pg).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing undecodable reaches read_receipts")
	require.Zero(t, metric(t, bd.reg, "receipts_reconciler_reconciled_total"))
}

func TestConsumerParksAfterBoundedOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	b := kafkatest.New(t)
	group := "reconciler-" + kafkatest.Suffix()

	// The consumer reaches Postgres through a proxy the test can cut.
	u, err := url.Parse(pgtest.URL())
	require.NoError(t, err)
	px := newProxy(t, u.Host)
	u.Host = px.addr()
	viaProxy, err := pgstore.Open(ctx, pgstore.Config{URL: u.String(), Schema: bd.schema.Name, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(viaProxy.Close)
	px.setCut(true)

	k := receipt.Key{User: "u1", Channel: "c1"}
	r := encode(t, state("u1", "c1", 5, true))
	produce(t, b, dltRecord(b, r.Key, r.Value, 1, 9, "rejected by postgres: check"))

	c := startConsumer(t, bd, b, group, func(cfg *deadletter.Config) {
		cfg.Postgres = viaProxy
		cfg.Retry = backoff.Config{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond, MaxDuration: 500 * time.Millisecond}
		cfg.AttemptTimeout = time.Second
	})

	// The repair gives up after its bound; parking then waits for Postgres.
	require.Eventually(t, func() bool {
		return metric(t, bd.reg, "receipts_reconciler_retries_total", "op", "park") >= 1
	}, waitFor, 20*time.Millisecond)
	require.GreaterOrEqual(t, metric(t, bd.reg, "receipts_reconciler_retries_total", "op", "repair"), 1.0)
	require.Equal(t, 1.0, metric(t, bd.reg, "receipts_reconciler_park_stalled"))
	require.ErrorContains(t, c.Ready(ctx), "parking stalled")
	require.Equal(t, int64(-1), committed(t, b, group, b.DLTTopic), "nothing is committed before the record is parked")

	px.setCut(false)
	require.Eventually(t, func() bool {
		return metric(t, bd.reg, "receipts_reconciler_parked_total", "kind", deadletter.KindUnavailable) == 1
	}, waitFor, 20*time.Millisecond)
	require.Eventually(t, func() bool { return committed(t, b, group, b.DLTTopic) == 1 }, waitFor, 20*time.Millisecond)
	require.Zero(t, metric(t, bd.reg, "receipts_reconciler_park_stalled"))

	parked, err := parked.New(bd.pg).List(ctx, parked.Query{})
	require.NoError(t, err)
	require.Len(t, parked, 1)
	p := parked[0]
	require.True(t, strings.HasPrefix(p.Reason, "unavailable: "), p.Reason)
	require.Contains(t, p.Reason, "postgres unavailable")
	require.Equal(t, b.Topic, p.SourceTopic)
	require.Equal(t, int32(1), p.SourcePartition)
	require.Equal(t, int64(9), p.SourceOffset)
	require.GreaterOrEqual(t, p.Attempts, 2)
	require.Equal(t, r.Value, p.Value)
	_, ok := pgState(t, bd.pg, k)
	require.False(t, ok, "the record was parked, not written")
	require.Zero(t, metric(t, bd.reg, "receipts_reconciler_reconciled_total"))
}
