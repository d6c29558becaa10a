package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/cmd/receiptsctl/internal/replay"
	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/parked"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

func TestReplayParkedRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	b := kafkatest.New(t)

	// A decodable record parked during an outage, and an undecodable one.
	k := receipt.Key{User: "u1", Channel: "c1"}
	good := encode(t, state("u1", "c1", 5, true))
	goodDL := dltRecord(b, good.Key, good.Value, 1, 9, "rejected by postgres")
	goodDL.Partition, goodDL.Offset = 0, 0
	garbage := dltRecord(b, []byte("u2:c1"), []byte("\x01\x02 from a future build"), 2, 10, "undecodable record")
	goodID, err := parked.New(bd.pg).Park(ctx, deadletter.ParkedFromRecord(goodDL, deadletter.KindUnavailable, pgstore.ErrUnavailable, 7))
	require.NoError(t, err)
	// Parking the same record again (a lost commit) keeps one row.
	again, err := parked.New(bd.pg).Park(ctx, deadletter.ParkedFromRecord(goodDL, deadletter.KindUnavailable, pgstore.ErrUnavailable, 7))
	require.NoError(t, err)
	require.Equal(t, goodID, again)
	garbageID, err := parked.New(bd.pg).Park(ctx, deadletter.ParkedFromRecord(garbage, deadletter.KindUndecodable, event.ErrUndecodable, 1))
	require.NoError(t, err)
	// Redis is ahead of the parked record: the repair takes the greater.
	_, err = cursors.NewStore(bd.rs).Merge(ctx, []receipt.State{state("u1", "c1", 6, true)})
	require.NoError(t, err)

	// Repair-only mode repairs the good one and refuses the garbage.
	rp, err := replay.NewReplayer(replay.Config{Postgres: bd.pg, Redis: bd.rs, Mode: replay.Repair})
	require.NoError(t, err)
	out, err := rp.ReplayID(ctx, goodID)
	require.NoError(t, err)
	require.Equal(t, replay.Repaired, out)
	p, ok := pgState(t, bd.pg, k)
	require.True(t, ok)
	require.Equal(t, int64(6), p.Read.Position.Seq)
	_, err = rp.ReplayID(ctx, goodID)
	require.ErrorIs(t, err, replay.ErrAlreadyReplayed)
	_, err = rp.ReplayID(ctx, garbageID)
	require.ErrorIs(t, err, event.ErrUndecodable)
	_, err = rp.ReplayID(ctx, 999999)
	require.ErrorIs(t, err, parked.ErrNotFound)

	// Auto mode re-produces what this build cannot decode to the main topic.
	producer := b.Client(t)
	rp, err = replay.NewReplayer(replay.Config{Postgres: bd.pg, Redis: bd.rs, Producer: producer, Topic: b.Topic})
	require.NoError(t, err)
	var seen []int64
	replayed, failed, err := rp.ReplayAll(ctx, func(r parked.Record, o replay.Outcome, err error) {
		require.NoError(t, err)
		require.Equal(t, replay.Produced, o)
		seen = append(seen, r.ID)
	})
	require.NoError(t, err)
	require.Equal(t, 1, replayed)
	require.Zero(t, failed)
	require.Equal(t, []int64{garbageID}, seen)

	cons := b.Client(t, kgo.ConsumeTopics(b.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) == 0 && pctx.Err() == nil {
		got = append(got, cons.PollFetches(pctx).Records()...)
	}
	require.Len(t, got, 1)
	require.Equal(t, garbage.Key, got[0].Key)
	require.Equal(t, garbage.Value, got[0].Value)
	require.Equal(t, garbageID, event.ParseDeadLetter(got[0]).ReplayedFrom)

	pending, err := parked.New(bd.pg).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)
	all, err := parked.New(bd.pg).List(ctx, parked.Query{IncludeReplayed: true})
	require.NoError(t, err)
	require.Len(t, all, 2)
	for _, r := range all {
		require.NotNil(t, r.ReplayedAt)
		require.WithinDuration(t, time.Now(), *r.ReplayedAt, time.Minute)
	}
}
