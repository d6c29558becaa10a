package persister_test

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/receipt"
)

// changes reads the whole change-feed topic (up to its end offsets) as
// "key kind seq" lines, sorted.
func (b *bundle) changes(topic string) []string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	ends, err := b.adm.ListEndOffsets(ctx, topic)
	require.NoError(b.t, err)
	var n int64
	ends.Each(func(lo kadm.ListedOffset) { n += lo.Offset })
	cl := b.broker.Client(b.t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []string
	for int64(len(out)) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(b.t, ctx.Err(), "read %d of %d changes", len(out), n)
		for _, r := range fs.Records() {
			var c recordv1.ReadStateChange
			require.NoError(b.t, proto.Unmarshal(r.Value, &c))
			require.Equal(b.t, c.GetUserId()+":"+c.GetChannelId(), string(r.Key), "keyed user:channel")
			require.Equal(b.t, uint32(1), c.GetSchemaVersion())
			out = append(out, string(r.Key)+" "+c.GetKind().String()+" "+c.GetMessageId())
		}
	}
	slices.Sort(out)
	return out
}

// The change feed carries each public cursor a window advanced, once per
// window and key (the window keeps the greatest), never a stale move, a
// private read, or a read of a user who does not share reads; a crash
// after the database commit and before the offset commit emits again.
func TestChangeFeed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	topic := b.broker.Topic + "-changes"
	require.NoError(t, b.broker.Cluster.CreateTopic(topic, 2, nil))
	cfg := b.config(prometheus.NewRegistry())
	cfg.ChangesTopic = topic
	b.exec(`INSERT INTO user_settings (user_id, share_read, share_delivered, version_ms) VALUES ('shy', false, true, 1)`)
	start := func() *running {
		c := cfg
		c.Registerer = prometheus.NewRegistry()
		return b.start(c)
	}
	r := start()

	private := receipt.State{Key: receipt.Key{User: "priv", Channel: "c"},
		PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 9}}, UpdatedAtUnixMs: 1}
	b.produce(b.cl, encode(t, state("u1", "c", 5, 7)), encode(t, state("u1", "c", 4, 4)), encode(t, state("u2", "c", 3, 0)),
		encode(t, state("shy", "c", 2, 2)), encode(t, private))
	b.requireCommittedToEnd()
	first := []string{"shy:c DELIVERED m2", "u1:c DELIVERED m7", "u1:c READ m5", "u2:c DELIVERED m3", "u2:c READ m3"}
	require.Equal(t, first, b.changes(topic))

	// Stale moves write nothing and emit nothing; an advance emits.
	b.produce(b.cl, encode(t, state("u1", "c", 2, 2)), encode(t, state("u2", "c", 8, 8)))
	b.requireCommittedToEnd()
	second := slices.Sorted(slices.Values(append(slices.Clone(first), "u2:c DELIVERED m8", "u2:c READ m8")))
	require.Equal(t, second, b.changes(topic))
	require.NoError(t, r.stop(t))

	// A crash between the database commit and the offset commit: the
	// offsets never land, so the next member replays the window and emits
	// its changes again (at least once).
	fault := b.failCommits()
	r = start()
	b.produce(b.cl, encode(t, state("u3", "c", 1, 1)))
	require.Eventually(t, func() bool { return len(b.changes(topic)) == len(second)+2 }, waitFor, 20e6)
	_ = r.stop(t) // its drain cannot commit either
	fault.Remove()
	start()
	b.requireCommittedToEnd()
	got := b.changes(topic)
	third := slices.Sorted(slices.Values(append(slices.Clone(second), "u3:c DELIVERED m1", "u3:c READ m1", "u3:c DELIVERED m1", "u3:c READ m1")))
	require.Equal(t, third, got)
}
