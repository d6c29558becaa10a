package persister_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// With the feed on, a window's thread registers reach the change feed
// through the thread kind's statements: their public moves, never a
// private read or a follow alone.
func TestThreadChangesThroughTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	topic := b.broker.Topic + "-changes"
	require.NoError(t, b.broker.Cluster.CreateTopic(topic, 2, nil))
	cfg := b.config(prometheus.NewRegistry())
	cfg.ChangesTopic = topic
	b.start(cfg)
	k := thread.Key{User: "tu", Ref: thread.Ref{Channel: "tc", Root: 4}}
	enc := func(st thread.State) *kgo.Record {
		rec, err := event.EncodeThread(st, 0, true)
		require.NoError(t, err)
		return rec
	}
	b.produce(b.cl,
		enc(thread.State{Key: k, Cursors: receipt.State{Read: receipt.Cursor{Position: receipt.Position{Seq: 2}, MessageID: "r2"}, UpdatedAtUnixMs: 5}}),
		enc(thread.State{Key: thread.Key{User: "pv", Ref: k.Ref}, Cursors: receipt.State{PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 3}}, UpdatedAtUnixMs: 5}}),
		enc(thread.State{Key: thread.Key{User: "fo", Ref: k.Ref}, Follow: thread.Follow{Following: true, VersionUnixMs: 5}}),
	)
	b.requireCommittedToEnd()
	require.Equal(t, []string{"tu:tc DELIVERED r2", "tu:tc READ r2"}, b.changes(topic))
}
