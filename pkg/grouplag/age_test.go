package grouplag_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kafkatest"
)

// The timestamp of the record at an offset, also from the middle of a batch
// (records produced together share one), and nothing at the end.
func TestRecordTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := kafkatest.New(t)
	cl := b.Client(t, kgo.DefaultProduceTopic(b.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Value: []byte("v"), Partition: 0, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	recs = append(recs, &kgo.Record{Value: []byte("v"), Partition: 1, Timestamp: base.Add(-time.Minute)})
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())

	got, err := grouplag.RecordTimes(ctx, cl, b.Topic, map[int32]int64{0: 2, 1: 0, 2: 0})
	require.NoError(t, err)
	require.Len(t, got, 2, "partition 2 is empty: no record at its end, no time")
	require.True(t, got[0].Equal(base.Add(2*time.Second)), "from the middle of the batch: %v", got[0])
	require.True(t, got[1].Equal(base.Add(-time.Minute)), "%v", got[1])

	got, err = grouplag.RecordTimes(ctx, cl, b.Topic, map[int32]int64{0: 4})
	require.NoError(t, err)
	require.True(t, got[0].Equal(base.Add(4*time.Second)), "the last record of the batch: %v", got[0])

	_, err = grouplag.RecordTimes(ctx, cl, "no-such-topic", map[int32]int64{0: 0})
	require.Error(t, err)
}
