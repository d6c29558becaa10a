// Package kafkatest runs an in-process kfake broker per test with the
// receipts topics under unique names, and client options tuned so fault
// tests are fast (short metadata age, heartbeats and fetch waits). Only
// _test.go files import it.
package kafkatest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitions is the partition count of the test topics (small, so tests
// exercise several partitions without 32 fetch sessions).
const Partitions = 4

// Broker is one test's cluster and topic names.
type Broker struct {
	Cluster  *kfake.Cluster
	Seeds    []string
	Topic    string
	DLTTopic string
	Group    string
	DataDir  string
}

// Suffix returns a random name suffix.
func Suffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New starts a kfake cluster with the topics created, closed at cleanup.
// Extra kfake options (e.g. kfake.DataDir) are appended.
func New(t testing.TB, opts ...kfake.Opt) *Broker {
	t.Helper()
	sfx := Suffix()
	b := &Broker{
		Topic:    "read-receipts-" + sfx,
		DLTTopic: "read-receipts-dlt-" + sfx,
		Group:    "persister-" + sfx,
	}
	b.start(t, opts...)
	require.NoError(t, b.Cluster.CreateTopic(b.Topic, Partitions, nil))
	require.NoError(t, b.Cluster.CreateTopic(b.DLTTopic, 2, nil))
	return b
}

func (b *Broker) start(t testing.TB, opts ...kfake.Opt) {
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	b.Cluster = c
	b.Seeds = c.ListenAddrs()
	t.Cleanup(c.Close)
}

// FastClientOpts are kgo options that make tests against kfake quick.
func FastClientOpts(seeds []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.SessionTimeout(6 * time.Second),
	}
}

// Client returns a plain client on the broker, closed at cleanup.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(FastClientOpts(b.Seeds), opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}
