package producer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/spool"
)

func TestConfigDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	c := Config{SpoolDir: "x"}.withDefaults()
	require.Equal(t, 2*time.Second, c.SpoolAfter)
	require.Equal(t, int64(256<<20), c.SpoolMaxBytes)
	require.Equal(t, 5*time.Second, c.ProduceTimeout)
	require.Equal(t, MetricsSubsystemDefault, c.MetricsSubsystem)
	require.Equal(t, 5, c.ProduceInflight, "several produce requests in flight")
	require.Negative(t, c.ProduceLinger, "no linger: the group commit batches")
	require.Equal(t, 1, Config{ProduceInflight: 1}.withDefaults().ProduceInflight, "1 keeps the idempotent producer")
	require.Equal(t, 2*time.Second, c.CallBound())
	require.Equal(t, 5*time.Second, Config{}.CallBound(), "no spool: ProduceTimeout")

	_, err := New(Config{
		Topic: "bad topic", ProduceTimeout: 100 * time.Millisecond,
		SpoolDir: "x", SpoolMaxBytes: 1000, SpoolAfter: -time.Second, MaxRecordBytes: 4000,
	})
	for _, want := range []string{
		`Topic: "bad topic" is not a Kafka topic name`,
		"ProduceTimeout: 100ms is below kgo's minimum",
		"SpoolMaxBytes: 1000 cannot hold one record",
		"SpoolAfter: must be positive",
	} {
		require.ErrorContains(t, err, want)
	}
	_, err = New(Config{Topic: "t", SpoolDir: "x"})
	require.ErrorContains(t, err, "MaxRecordBytes: must be > 0 with a spool")
	require.Equal(t, int64(8+spool.FrameOverhead+100), MinSpoolBytes(100))
}
