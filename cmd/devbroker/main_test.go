package main

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// TestServeCreatesTopicsAndPersists starts the broker on a data dir, checks
// the topics and their retention, produces a record, stops the broker (clean
// snapshot) and starts it again on the same dir: topics and the record are
// still there, and the second start does not recreate anything.
func TestServeCreatesTopicsAndPersists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	cfg := config{
		port: port, dataDir: dir,
		topic: "rr", partitions: 8, retention: 48 * time.Hour,
		dltTopic: "rr-dlt", dltPartitions: 2,
		retentionInterval: 50 * time.Millisecond,
		brokerConfigs:     keyValues{},
	}
	seeds := []string{"127.0.0.1:" + itoa(port)}

	startBroker := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, cfg, zap.NewNop()) }()
		return func() {
			cancel()
			require.NoError(t, <-done)
		}
	}

	stop := startBroker()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("rr"),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	adm := kadm.NewClient(cl)
	ctx := context.Background()

	var details kadm.TopicDetails
	require.Eventually(t, func() bool {
		details, err = adm.ListTopics(ctx, "rr", "rr-dlt")
		return err == nil && details.Has("rr") && details.Has("rr-dlt") && details["rr"].Err == nil && details["rr-dlt"].Err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Len(t, details["rr"].Partitions, 8)
	require.Len(t, details["rr-dlt"].Partitions, 2)

	rc, err := adm.DescribeTopicConfigs(ctx, "rr")
	require.NoError(t, err)
	v, err := rc.On("rr", nil)
	require.NoError(t, err)
	var retention string
	for _, c := range v.Configs {
		if c.Key == "retention.ms" {
			retention = c.MaybeValue()
		}
	}
	require.Equal(t, "172800000", retention)

	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte("u:c"), Value: []byte("v")}).FirstErr())
	cl.Close()
	stop()

	stop = startBroker()
	defer stop()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("rr"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl2.Close()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) == 0 && fctx.Err() == nil {
		got = append(got, cl2.PollFetches(fctx).Records()...)
	}
	require.Len(t, got, 1)
	require.Equal(t, "u:c", string(got[0].Key))
	ends, err := kadm.NewClient(cl2).ListEndOffsets(ctx, "rr")
	require.NoError(t, err)
	require.Len(t, ends["rr"], 8, "partition count survives the restart")
}

func TestKeyValuesFlag(t *testing.T) {
	t.Parallel()
	kv := keyValues{}
	require.NoError(t, kv.Set("a=1,b=2"))
	require.NoError(t, kv.Set("c=3"))
	require.Equal(t, keyValues{"a": "1", "b": "2", "c": "3"}, kv)
	require.Error(t, kv.Set("nope"))
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func itoa(n int) string { return strconv.Itoa(n) }
