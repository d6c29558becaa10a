package grouplag_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kafkatest"
)

func TestConsumerLag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kafkatest.New(t)
	cl := b.Client(t, kgo.DefaultProduceTopic(b.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)

	for i := range 10 {
		r := &kgo.Record{Value: []byte("v"), Partition: int32(i % 2)}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
	}

	// A group that never committed lags by everything.
	l, err := grouplag.ConsumerLag(ctx, adm, b.Group, b.Topic)
	require.NoError(t, err)
	require.EqualValues(t, 10, l.Total)
	require.Len(t, l.Partitions, kafkatest.Partitions)
	for _, p := range l.Partitions {
		require.EqualValues(t, -1, p.Committed)
	}
	require.Contains(t, l.String(), "total lag 10")

	// Commit part of partition 0, then everything.
	ends, err := adm.ListEndOffsets(ctx, b.Topic)
	require.NoError(t, err)
	commit := func(offsets kadm.Offsets) {
		t.Helper()
		resp, err := adm.CommitOffsets(ctx, b.Group, offsets)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	partial := kadm.Offsets{}
	partial.AddOffset(b.Topic, 0, 2, -1)
	commit(partial)
	l, err = grouplag.ConsumerLag(ctx, adm, b.Group, b.Topic)
	require.NoError(t, err)
	require.EqualValues(t, 8, l.Total)
	require.EqualValues(t, 2, l.Partitions[0].Committed)

	done := make(chan grouplag.TopicLag, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := grouplag.WaitLagZero(wctx, adm, b.Group, b.Topic, 10*time.Millisecond, nil)
		if err == nil {
			done <- l
		}
		close(done)
	}()
	commit(ends.Offsets())
	l, ok := <-done
	require.True(t, ok, "WaitLagZero returned an error")
	require.Zero(t, l.Total)

	// An unknown topic is an error, not lag 0.
	_, err = grouplag.ConsumerLag(ctx, adm, b.Group, "no-such-topic")
	require.Error(t, err)

	// A deadline reports the remaining lag.
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = grouplag.WaitLagZero(tctx, adm, "other-group", b.Topic, 10*time.Millisecond, nil)
	require.ErrorContains(t, err, "still 10")
}
