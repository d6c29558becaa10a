package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/readstate/receipts/pkg/kafkatest"
)

// topicsCluster is an empty kfake cluster (no topics) and an admin client.
func topicsCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return c, kadm.NewClient(cl)
}

// topicState reads a topic's partitions and the named configs.
func topicState(t *testing.T, adm *kadm.Client, topic string, keys ...string) (int, map[string]string) {
	t.Helper()
	ctx := context.Background()
	d, err := adm.ListTopics(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, d[topic].Err)
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	require.NoError(t, err)
	rc, err := rcs.On(topic, nil)
	require.NoError(t, err)
	got := map[string]string{}
	for _, c := range rc.Configs {
		for _, k := range keys {
			if c.Key == k {
				got[k] = c.MaybeValue()
			}
		}
	}
	return len(d[topic].Partitions), got
}

func ensureArgs(seeds []string, extra ...string) []string {
	return append([]string{"ensure", "--brokers", strings.Join(seeds, ","),
		"--topic", "marks", "--partitions", "8", "--replication-factor", "1",
		"--config", "retention.ms=172800000", "--config", "cleanup.policy=delete", "--config", "min.insync.replicas=1",
		"--dlt-topic", "marks-dlt", "--dlt-partitions", "2", "--dlt-config", "retention.ms=1209600000"}, extra...)
}

// Missing topics are created with the partitions and configs asked for; a
// second run finds them as wanted and changes nothing.
func TestTopicsEnsureCreatesThenReports(t *testing.T) {
	t.Parallel()
	c, adm := topicsCluster(t)
	var out, errOut bytes.Buffer
	require.NoError(t, topicsRun(context.Background(), ensureArgs(c.ListenAddrs()), &out, &errOut), out.String()+errOut.String())
	require.Contains(t, out.String(), "topic marks: created (8 partitions, replication factor 1, cleanup.policy=delete min.insync.replicas=1 retention.ms=172800000)")
	require.Contains(t, out.String(), "topic marks-dlt: created (2 partitions")

	parts, cfg := topicState(t, adm, "marks", "retention.ms", "cleanup.policy", "min.insync.replicas")
	require.Equal(t, 8, parts)
	require.Equal(t, map[string]string{"retention.ms": "172800000", "cleanup.policy": "delete", "min.insync.replicas": "1"}, cfg)
	parts, cfg = topicState(t, adm, "marks-dlt", "retention.ms")
	require.Equal(t, 2, parts)
	require.Equal(t, "1209600000", cfg["retention.ms"])

	out.Reset()
	require.NoError(t, topicsRun(context.Background(), ensureArgs(c.ListenAddrs()), &out, &errOut))
	require.Equal(t, "topic marks: exists (8 partitions, replication factor 1), as wanted\n"+
		"topic marks-dlt: exists (2 partitions, replication factor 1), as wanted\n", out.String())
}

// The change-feed topic is ensured beside the others when named, and must
// differ from them.
func TestTopicsEnsureChangesTopic(t *testing.T) {
	t.Parallel()
	c, adm := topicsCluster(t)
	var out, errOut bytes.Buffer
	require.NoError(t, topicsRun(context.Background(), ensureArgs(c.ListenAddrs(),
		"--changes-topic", "changes", "--changes-partitions", "4", "--changes-config", "retention.ms=86400000"), &out, &errOut), out.String()+errOut.String())
	require.Contains(t, out.String(), "topic changes: created (4 partitions")
	parts, cfg := topicState(t, adm, "changes", "retention.ms")
	require.Equal(t, 4, parts)
	require.Equal(t, "86400000", cfg["retention.ms"])

	err := topicsRun(context.Background(), ensureArgs(c.ListenAddrs(), "--changes-topic", "marks"), &out, &errOut)
	require.ErrorContains(t, err, "--changes-topic must differ")
}

// An existing topic that differs is reported, difference by difference,
// and left exactly as it is (partitions are never added, configs never
// altered); the run still succeeds.
func TestTopicsEnsureReportsDifferencesAndChangesNothing(t *testing.T) {
	t.Parallel()
	c, adm := topicsCluster(t)
	require.NoError(t, c.CreateTopic("marks", 3, map[string]string{"retention.ms": "3600000"}))
	var out, errOut bytes.Buffer
	require.NoError(t, topicsRun(context.Background(), ensureArgs(c.ListenAddrs()), &out, &errOut), out.String()+errOut.String())
	report := out.String()
	require.Contains(t, report, "topic marks: exists (3 partitions, replication factor 1), 2 difference(s), nothing changed:")
	require.Contains(t, report, "  partitions: want 8, have 3 (left as it is")
	require.Contains(t, report, "  retention.ms: want 172800000, have 3600000 (dynamic_topic_config; left as it is")
	require.Contains(t, report, "topic marks-dlt: created", "the missing one is still created")

	parts, cfg := topicState(t, adm, "marks", "retention.ms")
	require.Equal(t, 3, parts, "partitions unchanged")
	require.Equal(t, "3600000", cfg["retention.ms"], "config unchanged")
}

// A topic Kafka refuses to create fails the command (non-zero exit), named
// with the broker's reason; the other topic is still handled.
func TestTopicsEnsureFailsWhenCreationFails(t *testing.T) {
	t.Parallel()
	c, _ := topicsCluster(t)
	// A replication factor the single broker cannot meet.
	var out, errOut bytes.Buffer
	err := topicsRun(context.Background(), ensureArgs(c.ListenAddrs(), "--replication-factor", "3"), &out, &errOut)
	require.ErrorContains(t, err, "topics ensure: could not create marks, marks-dlt")
	require.Contains(t, out.String(), "topic marks: FAILED: creating topic marks: INVALID_REPLICATION_FACTOR")

	// A broker policy refusing one topic.
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Topic: "marks-dlt", Err: kerr.PolicyViolation, Count: -1})
	out.Reset()
	err = topicsRun(context.Background(), ensureArgs(c.ListenAddrs()), &out, &errOut)
	require.ErrorContains(t, err, "could not create marks-dlt")
	require.Contains(t, out.String(), "topic marks: created")
	require.Contains(t, out.String(), "topic marks-dlt: FAILED: creating topic marks-dlt: POLICY_VIOLATION")
}

// Bad flags are refused before Kafka is asked (exit 2); the connection
// flags are the shared ones (TLS, SASL).
func TestTopicsEnsureFlags(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	for _, args := range [][]string{
		{"ensure", "--partitions", "0"},
		{"ensure", "--replication-factor", "0"},
		{"ensure", "--topic", "x", "--dlt-topic", "x"},
		{"ensure", "--config", "novalue"},
		{"create"},
	} {
		err := topicsRun(context.Background(), args, &out, &errOut)
		require.Error(t, err, "%v", args)
	}
	err := topicsRun(context.Background(), []string{"ensure", "--kafka-sasl-mechanism", "PLAIN"}, &out, &errOut)
	require.ErrorContains(t, err, "needs --kafka-sasl-username")

	// Through SASL: the hook Job's path with credentials.
	b := kafkatest.New(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "ops", "pw"))
	out.Reset()
	require.NoError(t, topicsRun(context.Background(), []string{"ensure", "--brokers", strings.Join(b.Seeds, ","),
		"--topic", "t1", "--dlt-topic", "t1-dlt", "--kafka-sasl-mechanism", "SCRAM-SHA-256",
		"--kafka-sasl-username", "ops", "--kafka-sasl-password", "pw"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "topic t1: created (32 partitions")
}
