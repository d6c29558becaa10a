package persister_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/readstate/receipts/pkg/receipt"
)

// failCommits makes every OffsetCommit of the bundle's group fail (with an
// error code in the response, as a broker in trouble answers) until the
// returned handle is removed.
func (b *bundle) failCommits() *kfake.FaultHandle {
	return b.broker.Cluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: b.broker.Group, Err: kerr.UnknownServerError, Count: -1,
	})
}

// produceTo writes one record per state to the given partition and returns
// the max per key they must leave in Postgres, merged into want.
func (b *bundle) produceTo(cl *kgo.Client, partition int32, want map[receipt.Key]receipt.State, states ...receipt.State) {
	b.t.Helper()
	recs := make([]*kgo.Record, len(states))
	for i, s := range states {
		recs[i] = encode(b.t, s)
		recs[i].Partition = partition
		if cur, ok := want[s.Key]; ok {
			want[s.Key], _ = receipt.Merge(cur, s)
		} else {
			want[s.Key] = s
		}
	}
	b.produce(cl, recs...)
}

// A commit that fails does not stop the persister: the rows are written,
// the failure is counted, and the offsets are committed with the next
// batch once commits work again, even when that batch is on another
// partition. Nothing is lost and nothing moves backwards.
func TestFailedCommitIsCountedAndCommittedWithTheNextBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fault := b.failCommits()
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[receipt.Key]receipt.State{}
	var first []receipt.State
	for i := range 10 {
		first = append(first, state(fmt.Sprintf("cf%d", i%4), "c", int64(i+1), int64(i+1)))
	}
	b.produceTo(manual, 0, want, first...)

	reg := prometheus.NewRegistry()
	run := b.start(b.config(reg))
	require.Eventually(t, func() bool { return len(b.rows()) == len(want) && fault.Hits() >= 1 },
		waitFor, 10*time.Millisecond, "the rows are written although the commit fails")
	require.Eventually(t, func() bool { return metric(t, reg, "receipts_persister_commit_errors_total") >= 1 },
		waitFor, 10*time.Millisecond, "the failed commit is counted")
	b.requireRows(want)
	require.Empty(t, b.committed(), "the broker refused the commit")
	require.Zero(t, metric(t, reg, "receipts_persister_commits_total"))
	require.NoError(t, run.p.Ready(context.Background()), "a failed commit is not an outage")

	// Commits work again; the next batch is on partition 2 only, and its
	// commit carries partition 0's settled offset along.
	fault.Remove()
	b.produceTo(manual, 2, want, state("cf0", "c", 3, 3), state("cf9", "c", 1, 1)) // cf0 stale: no regression
	b.requireCommittedToEnd()
	require.Equal(t, map[int32]int64{0: 10, 2: 2}, b.committed())
	b.requireRows(want)
	require.Equal(t, int64(9), b.rows()[receipt.Key{User: "cf0", Channel: "c"}].Read.Position.Seq, "a stale record never moves a row back")
	require.Positive(t, metric(t, reg, "receipts_persister_commits_total"))
	require.Equal(t, 12.0, metric(t, reg, "receipts_persister_records_consumed_total"), "nothing was consumed twice")
	require.Zero(t, b.dltEnd())
	require.NoError(t, run.stop(t))
}

// When a second member joins, the first commits what it settled (but could
// not commit) on the partitions it gives away before they move: the new
// member starts after them and re-writes nothing.
func TestRevokeCommitsSettledOffsetsBeforePartitionsMove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fault := b.failCommits()
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[receipt.Key]receipt.State{}
	const perPartition = 5
	for p := range int32(4) {
		var sts []receipt.State
		for i := range perPartition {
			sts = append(sts, state(fmt.Sprintf("rv%d-%d", p, i), "c", int64(i+1), int64(i+1)))
		}
		b.produceTo(manual, p, want, sts...)
	}
	first := 4 * perPartition

	regA := prometheus.NewRegistry()
	b.start(b.config(regA))
	require.Eventually(t, func() bool {
		return metric(t, regA, "receipts_persister_records_consumed_total") == float64(first) &&
			metric(t, regA, "receipts_persister_rows_written_total") == float64(first) &&
			metric(t, regA, "receipts_persister_commit_errors_total") >= 1
	}, waitFor, 10*time.Millisecond, "the first member writes everything, its commits failing")
	require.Empty(t, b.committed())

	fault.Remove()
	commitsBefore := metric(t, regA, "receipts_persister_commits_total")
	regB := prometheus.NewRegistry()
	b.start(b.config(regB))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	g, err := b.broker.Cluster.WaitGroupStable(ctx, b.broker.Group, 2)
	require.NoError(t, err)
	require.Len(t, g.Members, 2)
	// The cooperative balancer revokes in a second round after the group
	// is first stable with both members: wait for the revoke's commit.
	require.Eventually(t, func() bool {
		return metric(t, regA, "receipts_persister_commits_total") > commitsBefore && len(b.committed()) > 0
	}, waitFor, 10*time.Millisecond, "the revoke committed the partitions given away")
	moved := b.committed()
	for p, at := range moved {
		require.Equal(t, int64(perPartition), at, "partition %d committed to its end", p)
	}

	// One more record per partition: both members consume, everything is
	// committed to the end, and nothing of the first round was consumed
	// again by anyone.
	for p := range int32(4) {
		b.produceTo(manual, p, want, state(fmt.Sprintf("rv%d-new", p), "c", 1, 1))
	}
	b.requireCommittedToEnd()
	consumedA := metric(t, regA, "receipts_persister_records_consumed_total")
	consumedB := metric(t, regB, "receipts_persister_records_consumed_total")
	require.Equal(t, float64(first+4), consumedA+consumedB, "no record was consumed twice (A %v, B %v)", consumedA, consumedB)
	require.LessOrEqual(t, consumedB, 4.0)
	require.LessOrEqual(t, metric(t, regB, "receipts_persister_rows_written_total"), 4.0, "the new member re-wrote nothing")
	b.requireRows(want)
}

// When the group session is lost (the coordinator no longer knows the
// member), what was settled but not committed is dropped, not committed:
// the group has moved on and a commit could rewind another member. The
// member rejoins, the partition is replayed from the last commit, and the
// replay is harmless.
func TestLostPartitionsAreNotCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fault := b.failCommits()
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[receipt.Key]receipt.State{}
	var sts []receipt.State
	for i := range 6 {
		sts = append(sts, state(fmt.Sprintf("lo%d", i), "c", int64(i+1), int64(i+1)))
	}
	b.produceTo(manual, 1, want, sts...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	core, logs := observer.New(zapcore.WarnLevel)
	cfg.Logger = zap.New(core)
	run := b.start(cfg)
	require.Eventually(t, func() bool {
		return len(b.rows()) == len(want) && metric(t, reg, "receipts_persister_commit_errors_total") >= 1
	}, waitFor, 10*time.Millisecond)
	require.Empty(t, b.committed())

	// Commits work again, but the next heartbeat learns that the member is
	// unknown: its partition is lost with its offset settled, uncommitted.
	// (Classic or KIP-848 heartbeat, whichever protocol the group speaks;
	// the cluster has no other group.)
	fault.Remove()
	hb := b.broker.Cluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Heartbeat, kmsg.ConsumerGroupHeartbeat}, TopLevel: true, Err: kerr.UnknownMemberID,
	})
	require.Eventually(t, func() bool {
		return logs.FilterMessageSnippet("partitions lost with offsets uncommitted").Len() == 1
	}, waitFor, 10*time.Millisecond, "the loss dropped the settled offset")
	require.Equal(t, 1, hb.Hits())

	// The loss committed nothing, so the member, rejoined, replays the
	// partition from the start: every record is consumed a second time and
	// written again (harmlessly), and only then committed.
	b.requireCommittedToEnd()
	require.Equal(t, 12.0, metric(t, reg, "receipts_persister_records_consumed_total"), "the lost partition was replayed")
	require.Equal(t, map[int32]int64{1: 6}, b.committed())
	b.requireRows(want)

	b.produceTo(manual, 1, want, state("lo0", "c", 9, 9))
	b.requireCommittedToEnd()
	require.Equal(t, map[int32]int64{1: 7}, b.committed())
	b.requireRows(want)
	require.NoError(t, run.stop(t))
}

// What the loss dropped stays dropped: a later batch on another partition
// commits its own offsets, never the lost partition's settled one (which
// could rewind the commit of the member that owns it now). The loss itself
// sends no OffsetCommit.
func TestLostSettledOffsetsAreNeverCommittedLater(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fault := b.failCommits()
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[receipt.Key]receipt.State{}
	b.produceTo(manual, 0, want, state("ls0", "c", 1, 1), state("ls1", "c", 2, 2), state("ls0", "c", 3, 3))

	reg := prometheus.NewRegistry()
	run := b.start(b.config(reg))
	require.Eventually(t, func() bool {
		return metric(t, reg, "receipts_persister_records_consumed_total") == 3 &&
			metric(t, reg, "receipts_persister_commit_errors_total") >= 1
	}, waitFor, 10*time.Millisecond)
	fault.Remove()

	commits := b.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Observe: true, Count: -1})
	run.p.LosePartitions(map[string][]int32{b.broker.Topic: {0}})
	require.Zero(t, commits.Hits(), "the loss commits nothing")

	b.produceTo(manual, 3, want, state("ls2", "c", 1, 1))
	require.Eventually(t, func() bool { return len(b.committed()) > 0 }, waitFor, 10*time.Millisecond)
	require.Equal(t, map[int32]int64{3: 1}, b.committed(), "partition 0's dropped offset is not committed along")
	b.requireRows(want)
	require.NoError(t, run.stop(t))
}

// On a quiet topic a failed commit is retried on its own: no later batch
// is needed for the offsets to reach the end (the lag would show forever).
func TestFailedCommitIsRetriedOnAQuietTopic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fault := b.broker.Cluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: b.broker.Group, Err: kerr.UnknownServerError, Count: 2,
	})
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[receipt.Key]receipt.State{}
	b.produceTo(manual, 1, want, state("q1", "c", 4, 4), state("q2", "c", 5, 5))

	reg := prometheus.NewRegistry()
	b.start(b.config(reg))
	b.requireCommittedToEnd()
	b.requireRows(want)
	require.GreaterOrEqual(t, fault.Hits(), 2)
	require.GreaterOrEqual(t, metric(t, reg, "receipts_persister_commit_errors_total"), 1.0, "the failures were counted")
	require.Equal(t, map[int32]int64{1: 2}, b.committed())
}
