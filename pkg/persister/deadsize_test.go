package persister_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
)

// setMaxMessageBytes sets max.message.bytes on topics.
func (b *bundle) setMaxMessageBytes(n int, topics ...string) {
	b.t.Helper()
	v := strconv.Itoa(n)
	res, err := b.adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, topics...)
	require.NoError(b.t, err)
	for _, r := range res {
		require.NoError(b.t, r.Err, r.Name)
	}
}

// noise is n bytes that do not compress (the producers compress batches).
func noise(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

// produceLargest produces, on partition 0, the largest foreign record the
// topic's max.message.bytes takes, and returns it.
func (b *bundle) produceLargest(limit int) *kgo.Record {
	b.t.Helper()
	cl := b.broker.Client(b.t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for n := limit; n > limit-256; n-- {
		r := &kgo.Record{Topic: b.broker.Topic, Partition: 0, Key: []byte("x:y"), Value: noise(n)}
		if cl.ProduceSync(context.Background(), r).FirstErr() == nil {
			return r
		}
	}
	b.t.Fatalf("no record near %d bytes fits the topic", limit)
	return nil
}

// TestRecordNearMaxMessageBytesDeadLettered: a foreign record at the
// topic's max.message.bytes (both topics share the limit) cannot be copied
// whole with its dead-letter headers; it is dead-lettered bounded
// (truncated, its size and offset in headers) and the partition goes on:
// the good record after it is written and the offsets reach the end.
func TestRecordNearMaxMessageBytesDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit = 64 << 10
	b.setMaxMessageBytes(limit, b.broker.Topic, b.broker.DLTTopic)
	big := b.produceLargest(limit)
	good := encode(t, state("g1", "c", 5, 5))
	good.Partition = 0
	b.produce(b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), good)

	reg := prometheus.NewRegistry()
	b.start(b.config(reg))
	b.requireCommittedToEnd()
	require.Len(t, b.rows(), 1)
	d := b.readDLT(1)[0]
	env := event.ParseDeadLetter(d)
	require.Equal(t, big.Offset, env.SourceOffset)
	require.Equal(t, int64(len(big.Value)), env.OriginalValueBytes)
	require.Len(t, d.Value, event.MaxDeadLetterValueBytes)
	require.Equal(t, 1.0, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "undecodable"))
}

// TestDeadLetterTooLargeSkipped: when the dead-letter topic refuses even
// the bounded dead letter as too large (its max.message.bytes below it),
// the dead letter is skipped with a log line and a count, never retried
// forever: the partition goes on.
func TestDeadLetterTooLargeSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setMaxMessageBytes(1024, b.broker.DLTTopic)
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	foreign := &kgo.Record{Partition: 1, Key: []byte("x:y"), Value: noise(3000)}
	good := encode(t, state("g2", "c", 6, 6))
	good.Partition = 1
	b.produce(manual, foreign, good)

	reg := prometheus.NewRegistry()
	b.start(b.config(reg))
	b.requireCommittedToEnd()
	require.Len(t, b.rows(), 1)
	require.Zero(t, b.dltEnd())
	require.Equal(t, 1.0, metric(t, reg, "receipts_persister_dead_letters_dropped_total"))
	require.Zero(t, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "undecodable"))
}
