package persister_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/persister"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

func TestNewValidatesEveryField(t *testing.T) {
	t.Parallel()
	_, err := persister.New(persister.Config{
		MaxPollRecords: -1,
		BatchRecords:   -1,
		StatementRows:  -1,
		Writers:        -1,
		Topic:          "same",
		DLTTopic:       "same",
		Retry:          backoff.Config{MaxDuration: time.Minute},
	})
	require.Error(t, err)
	for _, want := range []string{"MaxPollRecords", "BatchRecords", "StatementRows", "Writers must be > 0", "DLTTopic must differ", "Retry.MaxDuration must be 0"} {
		require.Contains(t, err.Error(), want)
	}

	_, err = persister.New(persister.Config{Writers: 5, Postgres: pgstore.Config{MaxConns: 4}})
	require.ErrorContains(t, err, "Postgres.MaxConns 4 must be >= Writers 5")
}

// A given store whose pool cannot hold a connection per writer is refused.
func TestNewRefusesAPoolSmallerThanWriters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(prometheus.NewRegistry())
	cfg.Store = b.schema.Store // pgtest pools have 4 connections
	cfg.Writers = 5
	_, err := persister.New(cfg)
	require.ErrorContains(t, err, "the Postgres pool has 4 connections, fewer than Writers 5")
}

// Many keys, each with duplicates and out-of-order seqs spread over many
// windows: Postgres ends with the max per key, field-wise, and the group's
// offsets reach the end.
func TestWritesMaxPerKeyAndCommitsToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	recs, want := maxPerKeyWorkload(t, 20, 10)
	b.produce(b.cl, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.MaxPollRecords = 50
	cfg.BatchRecords = 100
	run := b.start(cfg)
	b.requireCommittedToEnd()

	b.requireRows(want)
	require.NoError(t, run.p.Ready(context.Background()))
	require.Equal(t, 1.0, metric(t, reg, "receipts_persister_ready"))
	require.Equal(t, float64(len(recs)), metric(t, reg, "receipts_persister_records_consumed_total"))
	in, out := metric(t, reg, "receipts_persister_dedupe_records_in_total"), metric(t, reg, "receipts_persister_dedupe_rows_out_total")
	require.Equal(t, float64(len(recs)), in)
	require.Less(t, out, in, "duplicates in a window collapse")
	stale := metric(t, reg, "receipts_persister_stale_rows_skipped_total")
	require.Positive(t, stale, "rows behind what was written before cost no write")
	require.Equal(t, out, metric(t, reg, "receipts_persister_rows_written_total")+stale)
	require.Positive(t, metric(t, reg, "receipts_persister_batches_total", "trigger", "count"), "a full backlog cuts windows at BatchRecords")
	require.Positive(t, metric(t, reg, "receipts_persister_upsert_duration_seconds"))
	require.Zero(t, metric(t, reg, "receipts_persister_write_throttle_seconds_total"), "no --max-write-rate: no statement waits")
	require.Zero(t, b.dltEnd())
	require.NoError(t, run.stop(t))
}

// The same kind of workload written by four writers: every window is split
// into statements written concurrently, and the end state is the same: the
// max per key, offsets at the end, nothing dead-lettered.
func TestFourWritersWriteMaxPerKeyAndCommitToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	recs, want := maxPerKeyWorkload(t, 60, 8)
	b.produce(b.cl, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.BatchRecords = 200
	cfg.StatementRows = 40
	cfg.Writers = 4
	run := b.start(cfg)
	b.requireCommittedToEnd()

	b.requireRows(want)
	require.NoError(t, run.p.Ready(context.Background()))
	out := metric(t, reg, "receipts_persister_dedupe_rows_out_total")
	require.Equal(t, float64(len(recs)), metric(t, reg, "receipts_persister_dedupe_records_in_total"))
	written := metric(t, reg, "receipts_persister_rows_written_total")
	require.Equal(t, out, written+metric(t, reg, "receipts_persister_stale_rows_skipped_total"), "each row written once, by one statement")
	writes, upserts := metric(t, reg, "receipts_persister_write_duration_seconds"), metric(t, reg, "receipts_persister_upsert_duration_seconds")
	require.Positive(t, writes)
	require.Greater(t, upserts, writes, "windows were split into statements")
	require.GreaterOrEqual(t, 40*upserts, written, "no statement holds more than StatementRows")
	require.LessOrEqual(t, upserts, writes+written/40, "one statement per StatementRows rows without rejections or outages")
	require.Zero(t, metric(t, reg, "receipts_persister_retries_total", "op", "upsert"))
	require.Zero(t, b.dltEnd())
	require.NoError(t, run.stop(t))
}

// maxPerKeyWorkload returns records for users × channels keys, each key
// with duplicates, out-of-order seqs, delivered-only and mark-unread
// epochs, shuffled; and the max per key they must leave in Postgres.
func maxPerKeyWorkload(t *testing.T, users, channels int) ([]*kgo.Record, map[receipt.Key]receipt.State) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 11))
	want := map[receipt.Key]receipt.State{}
	var recs []*kgo.Record
	for u := range users {
		for c := range channels {
			user, ch := fmt.Sprintf("u%d", u), fmt.Sprintf("c%d", c)
			n := 5 + r.IntN(10)
			for range n {
				read := int64(1 + r.IntN(50))
				deliv := read
				if r.IntN(3) == 0 {
					read, deliv = 0, read+int64(r.IntN(5)) // delivered only, maybe ahead of any read
				}
				s := state(user, ch, read, deliv)
				if r.IntN(4) == 0 {
					s.Read.Position.Epoch = 1 // wins the own read over any seq of epoch 0, not the public one
				}
				if r.IntN(8) == 0 {
					s = receipt.MarkUnread(s.Key, 1+int64(r.IntN(50)), int64(r.IntN(2)))
				}
				copies := 1 + r.IntN(3) // duplicates
				for range copies {
					recs = append(recs, encode(t, s))
				}
				if cur, ok := want[s.Key]; ok {
					want[s.Key], _ = receipt.Merge(cur, s)
				} else {
					want[s.Key] = s
				}
			}
		}
	}
	r.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	return recs, want
}

// Garbage bytes, a valid event with an invalid id and an unknown schema
// version, interleaved with good records on one partition: the poison goes
// to the DLT with its headers, the good records are written, and the
// partition's offset reaches the end.
func TestPoisonRecordsGoToDLTWithoutStalling(t *testing.T) {
	t.Parallel()
	b := setup(t)
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	garbage := &kgo.Record{Key: []byte("p1:c1"), Value: []byte{0xff, 0xff, 0xff, 0xff}}
	badID := encode(t, state("bad user", "c1", 3, 3))
	ev := event.ToProto(state("p1", "c1", 9, 9))
	ev.SchemaVersion = 99
	v, err := proto.Marshal(ev)
	require.NoError(t, err)
	future := &kgo.Record{Key: []byte("p1:c1"), Value: v}

	seq := []*kgo.Record{
		encode(t, state("p1", "c1", 1, 1)), garbage,
		encode(t, state("p1", "c2", 2, 2)), badID,
		encode(t, state("p1", "c1", 4, 4)), future,
		encode(t, state("p2", "c1", 5, 5)),
	}
	for _, r := range seq {
		r.Partition = 0
	}
	b.produce(manual, seq...)
	poison := map[int64]string{garbage.Offset: "unmarshalling protobuf", badID.Offset: "invalid event: user_id", future.Offset: "unknown schema version 99"}

	reg := prometheus.NewRegistry()
	b.start(b.config(reg))
	b.requireCommittedToEnd()

	rows := b.rows()
	require.Len(t, rows, 3)
	require.Equal(t, int64(4), rows[receipt.Key{User: "p1", Channel: "c1"}].Read.Position.Seq, "the unknown-version seq 9 is not applied")
	require.Equal(t, int64(2), rows[receipt.Key{User: "p1", Channel: "c2"}].Read.Position.Seq)
	require.Equal(t, int64(5), rows[receipt.Key{User: "p2", Channel: "c1"}].Read.Position.Seq)

	dead := b.readDLT(3)
	bySrc := map[int64]*kgo.Record{}
	for _, d := range dead {
		env := event.ParseDeadLetter(d)
		require.Equal(t, b.broker.Topic, env.SourceTopic)
		require.Equal(t, int32(0), env.SourcePartition)
		require.Equal(t, 1, env.Attempt)
		require.GreaterOrEqual(t, env.SourceOffset, int64(0))
		bySrc[env.SourceOffset] = d
	}
	for _, src := range []*kgo.Record{garbage, badID, future} {
		d := bySrc[src.Offset]
		require.NotNil(t, d, "no dead letter for offset %d", src.Offset)
		require.Equal(t, src.Key, d.Key)
		require.Equal(t, src.Value, d.Value)
		reason := event.ParseDeadLetter(d).Reason
		require.True(t, strings.HasPrefix(reason, "undecodable record: "), reason)
		require.Contains(t, reason, poison[src.Offset])
	}
	require.Equal(t, 3.0, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "undecodable"))
	require.Zero(t, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "rejected"))
}

// A row that passes event validation but violates a constraint is
// bisected out: its records go to the DLT with the rejection, the rest of
// the batch is written.
func TestRejectedRowIsBisectedToDLT(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Test-only constraint: Postgres refuses one device id.
	b.exec(`ALTER TABLE read_receipts ADD CONSTRAINT test_reject_device CHECK (device_id <> 'reject-me')`)

	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, encode(t, state(fmt.Sprintf("g%d", i), "c", int64(i+1), int64(i+1))))
	}
	bad := state("bad", "c", 10, 10)
	bad.DeviceID = "reject-me"
	bad2 := state("bad", "c", 12, 12)
	bad2.DeviceID = "reject-me"
	badRecs := []*kgo.Record{encode(t, bad), encode(t, bad2)}
	// Put the bad key among the good ones so it shares their batch.
	recs = append(recs[:30], append(badRecs, recs[30:]...)...)
	b.produce(b.cl, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.Linger = 300 * time.Millisecond // coalesce the whole backlog into few batches
	b.start(cfg)
	b.requireCommittedToEnd()

	rows := b.rows()
	require.Len(t, rows, 60)
	_, ok := rows[receipt.Key{User: "bad", Channel: "c"}]
	require.False(t, ok)

	dead := b.readDLT(2)
	offsets := map[string]bool{}
	for _, d := range dead {
		require.Equal(t, "bad:c", string(d.Key))
		reason := event.ParseDeadLetter(d).Reason
		require.Contains(t, reason, "rejected by postgres")
		require.Contains(t, reason, "23514")
		env := event.ParseDeadLetter(d)
		offsets[fmt.Sprintf("%d@%d", env.SourceOffset, env.SourcePartition)] = true
	}
	for _, r := range badRecs {
		require.True(t, offsets[fmt.Sprintf("%d@%d", r.Offset, r.Partition)], "record %d@%d not dead-lettered", r.Offset, r.Partition)
	}
	require.Equal(t, 2.0, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "rejected"))
	require.Equal(t, 60.0, metric(t, reg, "receipts_persister_rows_written_total"))
	var batches float64
	for _, tr := range []string{"count", "linger", "revoke", "shutdown"} {
		batches += metric(t, reg, "receipts_persister_batches_total", "trigger", tr)
	}
	require.GreaterOrEqual(t, metric(t, reg, "receipts_persister_upsert_duration_seconds"), batches+2,
		"the batch holding the bad row was split, not written row by row elsewhere")
}

// An outage (the table is gone) is retried: readiness fails with the
// reason, nothing is committed or dead-lettered, and once the table is
// back everything is written without help.
func TestOutageIsRetriedUntilPostgresIsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`ALTER TABLE read_receipts RENAME TO read_receipts_down`)

	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, encode(t, state(fmt.Sprintf("o%d", i), "c", 5, 5)))
	}
	b.produce(b.cl, recs...)

	reg := prometheus.NewRegistry()
	run := b.start(b.config(reg))
	ctx := context.Background()
	require.Eventually(t, func() bool {
		return metric(t, reg, "receipts_persister_retries_total", "op", "upsert") >= 5
	}, waitFor, 10*time.Millisecond)
	err := run.p.Ready(ctx)
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "postgres unavailable: "), err.Error())
	require.Contains(t, err.Error(), "42P01")
	require.Zero(t, metric(t, reg, "receipts_persister_ready"))
	require.Empty(t, b.committed(), "nothing is committed before the rows are")
	require.Zero(t, b.dltEnd(), "an outage never dead-letters")

	b.exec(`ALTER TABLE read_receipts_down RENAME TO read_receipts`)
	b.requireCommittedToEnd()
	require.Len(t, b.rows(), 100)
	require.NoError(t, run.p.Ready(ctx))
	require.Equal(t, 1.0, metric(t, reg, "receipts_persister_ready"))
	require.Zero(t, b.dltEnd())
	require.Zero(t, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "rejected"))
}

// A persister stopped while it cannot write commits nothing; a second
// member of the group then writes everything.
func TestOffsetsWaitForTheDatabaseAcrossRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`ALTER TABLE read_receipts RENAME TO read_receipts_down`)

	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, encode(t, state(fmt.Sprintf("k%d", i), "c", int64(i+1), int64(i+1))))
	}
	b.produce(b.cl, recs...)

	reg1 := prometheus.NewRegistry()
	cfg1 := b.config(reg1)
	cfg1.MaxPollRecords = 20
	cfg1.BatchRecords = 20
	cfg1.DrainTimeout = 300 * time.Millisecond
	first := b.start(cfg1)
	require.Eventually(t, func() bool {
		return metric(t, reg1, "receipts_persister_retries_total", "op", "upsert") >= 2
	}, waitFor, 10*time.Millisecond)
	require.NoError(t, first.stop(t), "an abandoned drain is not an error")
	require.Empty(t, b.committed())
	require.LessOrEqual(t, metric(t, reg1, "receipts_persister_records_consumed_total"), 40.0,
		"fetching stayed on the window being written and the one filled behind it")

	b.exec(`ALTER TABLE read_receipts_down RENAME TO read_receipts`)
	require.Empty(t, b.rows())
	b.start(b.config(prometheus.NewRegistry()))
	b.requireCommittedToEnd()
	got := b.rows()
	require.Len(t, got, 200)
	for i := range 200 {
		require.Equal(t, int64(i+1), got[receipt.Key{User: fmt.Sprintf("k%d", i), Channel: "c"}].Read.Position.Seq)
	}
	require.Zero(t, b.dltEnd())
}

// Shutdown finishes the batch in hand on a detached context: the database
// comes back during the drain, and the batch is written and committed.
func TestShutdownDrainsTheBatchInHand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`ALTER TABLE read_receipts RENAME TO read_receipts_down`)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, encode(t, state(fmt.Sprintf("d%d", i), "c", 3, 3)))
	}
	// One partition, so the first poll holds all ten.
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, r := range recs {
		r.Partition = 1
	}
	b.produce(manual, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.DrainTimeout = 15 * time.Second
	run := b.start(cfg)
	require.Eventually(t, func() bool {
		return metric(t, reg, "receipts_persister_retries_total", "op", "upsert") >= 2
	}, waitFor, 10*time.Millisecond)
	consumed := metric(t, reg, "receipts_persister_records_consumed_total")
	require.Positive(t, consumed)

	run.cancel()
	require.Eventually(t, func() bool {
		// Still retrying after the cancel: the drain goes on.
		return metric(t, reg, "receipts_persister_retries_total", "op", "upsert") >= 4
	}, waitFor, 10*time.Millisecond)
	b.exec(`ALTER TABLE read_receipts_down RENAME TO read_receipts`)
	require.NoError(t, run.stop(t))
	require.Len(t, b.rows(), int(consumed))
	require.Equal(t, map[int32]int64{1: int64(consumed)}, b.committed())
	require.Equal(t, 1.0, metric(t, reg, "receipts_persister_batches_total", "trigger", "linger")+
		metric(t, reg, "receipts_persister_batches_total", "trigger", "count"))
}

// A dead-letter produce that fails is retried, and nothing is committed
// until the dead letter is acked: the poison record is never skipped.
func TestFailedDeadLetterProduceIsRetriedBeforeCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fault := b.broker.Cluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: b.broker.DLTTopic, Err: kerr.InvalidRecord, Count: -1,
	})
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	good := encode(t, state("f1", "c", 7, 7))
	garbage := &kgo.Record{Key: []byte("f1:c"), Value: []byte("not protobuf \xff\xff")}
	good.Partition, garbage.Partition = 2, 2
	b.produce(manual, garbage, good)

	reg := prometheus.NewRegistry()
	run := b.start(b.config(reg))
	require.Eventually(t, func() bool {
		return metric(t, reg, "receipts_persister_retries_total", "op", "dead_letter") >= 3
	}, waitFor, 10*time.Millisecond)
	err := run.p.Ready(context.Background())
	require.ErrorContains(t, err, "dead-letter topic unavailable")
	require.Zero(t, metric(t, reg, "receipts_persister_ready"))
	require.Empty(t, b.committed())

	fault.Remove()
	b.requireCommittedToEnd()
	require.EqualValues(t, 1, b.dltEnd())
	d := b.readDLT(1)[0]
	require.Equal(t, garbage.Offset, event.ParseDeadLetter(d).SourceOffset)
	require.Len(t, b.rows(), 1)
	require.NoError(t, run.p.Ready(context.Background()))
	require.Equal(t, 1.0, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "undecodable"))
}

// A member joining while another lingers over a batch makes the lingering
// one cut its batch short (trigger revoke) instead of holding up the
// rebalance until the linger ends; the group then shares the work.
func TestRebalanceCutsTheLingerShort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// One partition, one produce batch: the first poll holds everything,
	// so nothing is left for a second linger after the rebalance.
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 40 {
		r := encode(t, state(fmt.Sprintf("r%d", i), "c", 2, 2))
		r.Partition = 0
		recs = append(recs, r)
	}
	b.produce(manual, recs...)

	regA := prometheus.NewRegistry()
	cfgA := b.config(regA)
	cfgA.Linger = time.Minute // far longer than the test may take
	lingering := make(chan struct{}, 1)
	b.startWith(cfgA, func(p *persister.Persister) {
		p.SetOnLinger(func() {
			select {
			case lingering <- struct{}{}:
			default:
			}
		})
	})
	select {
	case <-lingering:
	case <-time.After(waitFor):
		t.Fatal("the first member never lingered")
	}

	start := time.Now()
	b.start(b.config(prometheus.NewRegistry()))
	require.Eventually(t, func() bool {
		return metric(t, regA, "receipts_persister_batches_total", "trigger", "revoke") >= 1
	}, waitFor, 10*time.Millisecond)
	require.Less(t, time.Since(start), time.Minute/2)
	require.Zero(t, metric(t, regA, "receipts_persister_batches_total", "trigger", "linger"), "the linger never ran out")
	require.Eventually(t, func() bool { return metric(t, regA, "receipts_persister_rows_written_total") > 0 },
		waitFor, 10*time.Millisecond, "the cut batch is written")
	// The cut batch is settled, B then writes what moved to it (A, keeping
	// partitions, may be lingering again over anything left).
	b.requireCommittedToEnd()
	require.Len(t, b.rows(), 40)
}

// usersOverShards returns perShard users for each of n shards, named
// prefix0, prefix1, ...
func usersOverStatements(n, perStatement int, prefix string) [][]string {
	// Zero-padded names sort in creation order, so with StatementRows =
	// perStatement × channels statement i holds exactly users[i].
	out := make([][]string, n)
	for i := range n * perStatement {
		out[i/perStatement] = append(out[i/perStatement], fmt.Sprintf("%s%03d", prefix, i))
	}
	return out
}

// With four writers, a row Postgres rejects is dead-lettered, and every
// other row, in its statement and in every other statement, is written.
func TestRejectedRowInOneStatementIsDeadLetteredAndEveryStatementWritten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`ALTER TABLE read_receipts ADD CONSTRAINT test_reject_device CHECK (device_id <> 'reject-me')`)
	const writers = 4

	var recs []*kgo.Record
	want := map[receipt.Key]int64{}
	for s, users := range usersOverStatements(writers, 6, "s") {
		for i, u := range users {
			for c := range 3 {
				st := state(u, fmt.Sprintf("c%d", c), int64(10*s+i+1), int64(10*s+i+1))
				recs = append(recs, encode(t, st))
				want[st.Key] = st.Read.Position.Seq
			}
		}
	}
	bad, bad2 := state("bad", "c", 10, 10), state("bad", "c", 12, 12)
	bad.DeviceID, bad2.DeviceID = "reject-me", "reject-me"
	badRecs := []*kgo.Record{encode(t, bad), encode(t, bad2)}
	recs = append(recs[:40], append(badRecs, recs[40:]...)...)
	// One partition, one produce: one window holds every statement ("bad"
	// sorts first: it is in the first).
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, r := range recs {
		r.Partition = 0
	}
	b.produce(manual, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.Writers = writers
	cfg.StatementRows = 6 * 3
	cfg.Linger = 300 * time.Millisecond
	b.start(cfg)
	b.requireCommittedToEnd()

	rows := b.rows()
	require.Len(t, rows, len(want), "every good row of every statement")
	for k, seq := range want {
		require.Equal(t, seq, rows[k].Read.Position.Seq, "read of %v", k)
	}
	dead := b.readDLT(2)
	for _, d := range dead {
		require.Equal(t, "bad:c", string(d.Key))
		require.Contains(t, event.ParseDeadLetter(d).Reason, "23514")
	}
	require.Equal(t, 2.0, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "rejected"))
	require.Equal(t, float64(len(want)), metric(t, reg, "receipts_persister_rows_written_total"))
	require.Zero(t, metric(t, reg, "receipts_persister_retries_total", "op", "upsert"))
	t.Logf("%v statements for %v window writes",
		metric(t, reg, "receipts_persister_upsert_duration_seconds"), metric(t, reg, "receipts_persister_write_duration_seconds"))
}

// An outage that hits two statements of a four-statement window: the
// other statements commit, the two retry on their own (readiness fails,
// fetching pauses, nothing is committed or dead-lettered) until both
// recover, the first to recover does not end the outage, and no committed
// statement is written twice.
func TestOutageInSomeStatementsRetriesOnlyThoseAndResumes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const writers = 4
	// Test-only: a BEFORE INSERT trigger (it fires for every row an
	// upsert proposes) logs each write of a row, and fails with a
	// serialization failure (40001, retryable) for the users in "down".
	b.exec(`CREATE TABLE down (user_id text PRIMARY KEY)`)
	b.exec(`CREATE TABLE write_log (user_id text NOT NULL, channel_id text NOT NULL)`)
	b.exec(`CREATE FUNCTION ` + b.schema.Name + `.test_outage() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM down WHERE user_id = NEW.user_id) THEN
				RAISE EXCEPTION 'test outage for %', NEW.user_id USING ERRCODE = '40001';
			END IF;
			INSERT INTO write_log VALUES (NEW.user_id, NEW.channel_id);
			RETURN NEW;
		END $$`)
	b.exec(`CREATE TRIGGER test_outage BEFORE INSERT ON read_receipts FOR EACH ROW EXECUTE FUNCTION ` + b.schema.Name + `.test_outage()`)

	shardUsers := usersOverStatements(writers, 5, "o")
	downA, downB := shardUsers[1][0], shardUsers[3][0]
	b.exec(fmt.Sprintf(`INSERT INTO down VALUES ('%s'), ('%s')`, downA, downB))
	var recs []*kgo.Record
	for _, users := range shardUsers {
		for _, u := range users {
			for c := range 2 {
				r := encode(t, state(u, fmt.Sprintf("c%d", c), 4, 4))
				r.Partition = 0
				recs = append(recs, r)
			}
		}
	}
	manual := b.broker.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	b.produce(manual, recs...)

	reg := prometheus.NewRegistry()
	cfg := b.config(reg)
	cfg.Writers = writers
	cfg.StatementRows = 5 * 2
	cfg.Linger = 300 * time.Millisecond // the whole backlog in one window
	run := b.start(cfg)
	ctx := context.Background()

	// Shards 0 and 2 commit while 1 and 3 retry.
	rowsOf := func(shards ...int) int {
		n := 0
		for _, s := range shards {
			n += 2 * len(shardUsers[s])
		}
		return n
	}
	require.Eventually(t, func() bool {
		return len(b.rows()) == rowsOf(0, 2) && metric(t, reg, "receipts_persister_retries_total", "op", "upsert") >= 6
	}, waitFor, 10*time.Millisecond)
	err := run.p.Ready(ctx)
	require.ErrorContains(t, err, "postgres unavailable: ")
	require.ErrorContains(t, err, "40001")
	require.Zero(t, metric(t, reg, "receipts_persister_ready"))
	require.Empty(t, b.committed(), "nothing is committed before every shard is")
	require.Zero(t, b.dltEnd(), "an outage never dead-letters")
	require.Equal(t, float64(len(recs)), metric(t, reg, "receipts_persister_records_consumed_total"), "one window")

	// Shard 1 recovers; shard 3 is still out, and so is the persister.
	b.exec(fmt.Sprintf(`DELETE FROM down WHERE user_id = '%s'`, downA))
	require.Eventually(t, func() bool { return len(b.rows()) == rowsOf(0, 1, 2) }, waitFor, 10*time.Millisecond)
	retried := metric(t, reg, "receipts_persister_retries_total", "op", "upsert")
	for metric(t, reg, "receipts_persister_retries_total", "op", "upsert") < retried+3 {
		require.ErrorContains(t, run.p.Ready(ctx), "40001", "shard 3 is still retrying")
		require.Zero(t, metric(t, reg, "receipts_persister_ready"))
	}
	require.Empty(t, b.committed())

	b.exec(fmt.Sprintf(`DELETE FROM down WHERE user_id = '%s'`, downB))
	b.requireCommittedToEnd()
	require.Len(t, b.rows(), len(recs))
	require.NoError(t, run.p.Ready(ctx))
	require.Equal(t, 1.0, metric(t, reg, "receipts_persister_ready"))
	require.Zero(t, b.dltEnd())
	require.Zero(t, metric(t, reg, "receipts_persister_dead_letters_total", "kind", "rejected"))
	require.Equal(t, float64(len(recs)), metric(t, reg, "receipts_persister_rows_written_total"), "each row written once")

	var keys, writes int
	require.NoError(t, b.schema.Store.Pool().QueryRow(ctx,
		`SELECT count(DISTINCT (user_id, channel_id)), count(*) FROM write_log`).Scan(&keys, &writes))
	require.Equal(t, len(recs), keys)
	require.Equal(t, len(recs), writes, "no committed statement was written again")
}
