package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/deadletter"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/parked"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// dltBundle is one test's stores: a Postgres schema, a Redis prefix on the
// test Redis (logical database 1), and the flags that point the commands at
// them.
type dltBundle struct {
	t         *testing.T
	pg        *pgstore.Store
	rs        *redisstore.Store
	pgArgs    []string
	redisArgs []string
}

func newDLTBundle(t *testing.T) *dltBundle {
	t.Helper()
	schema := pgtest.NewSchema(t)
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	return &dltBundle{
		t:         t,
		pg:        schema.Store,
		rs:        redisstore.New(rdb, redisstore.Config{Prefix: prefix}),
		pgArgs:    []string{"--pg-url", schema.URL},
		redisArgs: []string{"--redis-url", redistest.URL(), "--redis-prefix", prefix},
	}
}

// run runs a dlt or sweep command line and returns its output.
func (b *dltBundle) run(args ...string) (string, error) {
	b.t.Helper()
	var out, errOut bytes.Buffer
	err := dltRun(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

// park parks a dead letter of value (from source partition 0 at offset) and
// returns its id.
func (b *dltBundle) park(key, value []byte, offset int64, reason string) int64 {
	b.t.Helper()
	src := &kgo.Record{Topic: "read-receipts", Partition: 0, Offset: offset, Key: key, Value: value}
	dl := event.DeadLetter(src, "read-receipts-dlt", reason)
	id, err := parked.New(b.pg).Park(context.Background(), deadletter.ParkedFromRecord(dl, deadletter.KindUnavailable, pgstore.ErrUnavailable, 3))
	require.NoError(b.t, err)
	return id
}

func (b *dltBundle) parkState(st receipt.State, offset int64) int64 {
	b.t.Helper()
	r, err := event.Encode(st)
	require.NoError(b.t, err)
	return b.park(r.Key, r.Value, offset, "rejected by postgres")
}

// both reads a key from Postgres and Redis.
func (b *dltBundle) both(k receipt.Key) (pg, rd *receipt.State) {
	b.t.Helper()
	ctx := context.Background()
	rows, err := cursors.NewPostgres(b.pg).Get(ctx, k.User, []string{k.Channel})
	require.NoError(b.t, err)
	if len(rows) == 1 {
		pg = &rows[0]
	}
	sts, _, err := cursors.NewStore(b.rs).Get(ctx, k.User, []string{k.Channel})
	require.NoError(b.t, err)
	if len(sts) == 1 {
		rd = &sts[0]
	}
	return pg, rd
}

// listedRow matches a row of a dlt list table: the id, then when parked.
var listedRow = regexp.MustCompile(`(?m)^(\d+)\s+\d{4}-\d\d-\d\dT`)

// listedIDs returns the ids of the rows of a dlt list table, in order.
func listedIDs(out string) []int64 {
	var ids []int64
	for _, m := range listedRow.FindAllStringSubmatch(out, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		ids = append(ids, id)
	}
	return ids
}

func TestDLTListPendingAllPagingAndFull(t *testing.T) {
	t.Parallel()
	b := newDLTBundle(t)
	long := "rejected by postgres: " + strings.Repeat("a very long constraint story, ", 5) + "THE END"
	id1 := b.park([]byte("u1:c1"), []byte("v1"), 10, long)
	id2 := b.park([]byte("u2:c1"), []byte("v2"), 11, "short reason")
	id3 := b.park([]byte("bin\x00key"), []byte("v3"), 12, "binary key")
	marked, err := parked.New(b.pg).MarkReplayed(context.Background(), id2)
	require.NoError(t, err)
	require.True(t, marked)

	// Pending only, by default; long reasons are cut.
	out, err := b.run(append([]string{"dlt", "list"}, b.pgArgs...)...)
	require.NoError(t, err)
	require.Equal(t, []int64{id1, id3}, listedIDs(out), out)
	require.Contains(t, out, "ID  PARKED AT")
	require.NotContains(t, out, "REPLAYED AT")
	require.NotContains(t, out, "THE END", "the reason is truncated")
	require.Contains(t, out, "...")
	require.Contains(t, out, "read-receipts/0@10", "the source is shown")
	require.Contains(t, out, `"bin\x00key"`, "a binary key is quoted")
	require.Contains(t, out, "2 listed; 2 pending in total")
	require.NotContains(t, out, "more may follow")

	// --full prints whole reasons.
	out, err = b.run(append([]string{"dlt", "list", "--full"}, b.pgArgs...)...)
	require.NoError(t, err)
	require.Contains(t, out, "THE END")

	// --all lists the replayed one too, with when.
	out, err = b.run(append([]string{"dlt", "list", "--all"}, b.pgArgs...)...)
	require.NoError(t, err)
	require.Equal(t, []int64{id1, id2, id3}, listedIDs(out), out)
	require.Contains(t, out, "REPLAYED AT")
	require.Regexp(t, regexp.MustCompile(`(?m)^`+strconv.FormatInt(id2, 10)+`\s+\S+\s+\d{4}-\d\d-\d\dT\S+Z\s`), out, "the replayed row shows when")
	require.Regexp(t, regexp.MustCompile(`(?m)^`+strconv.FormatInt(id1, 10)+`\s+\S+\s+-\s`), out, "a pending row shows -")
	require.Contains(t, out, "3 listed; 2 pending in total")

	// Paging: --limit cuts, says where to go on, and --after goes on.
	out, err = b.run(append([]string{"dlt", "list", "--limit", "1"}, b.pgArgs...)...)
	require.NoError(t, err)
	require.Equal(t, []int64{id1}, listedIDs(out), out)
	require.Contains(t, out, fmt.Sprintf("more may follow: --after %d", id1))
	out, err = b.run(append([]string{"dlt", "list", "--limit", "1", "--after", strconv.FormatInt(id1, 10)}, b.pgArgs...)...)
	require.NoError(t, err)
	require.Equal(t, []int64{id3}, listedIDs(out), "the replayed id2 is skipped: %s", out)
	out, err = b.run(append([]string{"dlt", "list", "--after", strconv.FormatInt(id3, 10)}, b.pgArgs...)...)
	require.NoError(t, err)
	require.Empty(t, listedIDs(out), out)
	require.Contains(t, out, "0 listed; 2 pending in total")

	for _, bad := range []string{"0", "-3"} {
		_, err = b.run(append([]string{"dlt", "list", "--limit", bad}, b.pgArgs...)...)
		require.ErrorContains(t, err, "--limit must be > 0", bad)
	}
	_, err = b.run(append([]string{"dlt", "list", "--limit", "many"}, b.pgArgs...)...)
	require.Error(t, err)
}

func TestDLTCommandWordsAndUsage(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.ErrorContains(t, dltRun(context.Background(), []string{"dlt"}, &out, &errOut), "no subcommand")
	require.Contains(t, errOut.String(), "receiptsctl dlt list")
	errOut.Reset()
	require.ErrorContains(t, dltRun(context.Background(), []string{"dlt", "purge"}, &out, &errOut), `unknown subcommand "purge"`)
	require.Contains(t, errOut.String(), "receiptsctl dlt replay")
	out.Reset()
	require.NoError(t, dltRun(context.Background(), []string{"dlt", "help"}, &out, &errOut))
	require.Contains(t, out.String(), "receiptsctl sweep")

	// A command's usage and flag errors go to errOut, not to the process's
	// stderr.
	for _, cmd := range [][]string{{"dlt", "list"}, {"dlt", "replay"}, {"sweep"}} {
		out.Reset()
		errOut.Reset()
		require.ErrorIs(t, dltRun(context.Background(), append(cmd, "-h"), &out, &errOut), flag.ErrHelp)
		require.Contains(t, errOut.String(), "Usage: receiptsctl "+strings.Join(cmd, " "), cmd)
		require.Contains(t, errOut.String(), "-pg-url", cmd)
		require.Empty(t, out.String())
	}
	errOut.Reset()
	require.Error(t, dltRun(context.Background(), []string{"dlt", "list", "--limit", "many"}, &out, &errOut))
	require.Contains(t, errOut.String(), `invalid value "many" for flag -limit`)
}

func TestDLTReplayRepairsProducesAndRefusesTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newDLTBundle(t)
	broker := kafkatest.New(t)
	kafkaArgs := []string{"--brokers", strings.Join(broker.Seeds, ","), "--topic", broker.Topic}
	replayArgs := func(args ...string) []string {
		return append(append(append(append([]string{"dlt", "replay"}, args...), b.pgArgs...), b.redisArgs...), kafkaArgs...)
	}

	// Redis is ahead on read, the parked record on delivered: a repair
	// leaves both stores at the max of both.
	k1 := receipt.Key{User: "u1", Channel: "c1"}
	_, err := cursors.NewStore(b.rs).Merge(ctx, []receipt.State{state(k1.User, k1.Channel, 7, 7)})
	require.NoError(t, err)
	id1 := b.parkState(state(k1.User, k1.Channel, 5, 9), 1)
	k2 := receipt.Key{User: "u2", Channel: "c1"}
	id2 := b.parkState(state(k2.User, k2.Channel, 4, 4), 2)
	garbage := b.park([]byte("u3:c1"), []byte("\x01\x02 from a future build"), 3, "undecodable record")

	for _, bad := range [][]string{replayArgs(), replayArgs("--id", "1", "--all")} {
		_, err := b.run(bad...)
		require.ErrorContains(t, err, "give exactly one of --id N or --all")
	}

	out, err := b.run(replayArgs("--id", strconv.FormatInt(id1, 10))...)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d\trepaired\n", id1), out)
	pg, rd := b.both(k1)
	require.NotNil(t, pg)
	require.NotNil(t, rd)
	for _, st := range []*receipt.State{pg, rd} {
		require.Equal(t, int64(7), st.Read.Position.Seq)
		require.Equal(t, int64(9), st.Delivered.Position.Seq)
	}

	_, err = b.run(replayArgs("--id", strconv.FormatInt(id1, 10))...)
	require.ErrorContains(t, err, "already replayed")
	_, err = b.run(replayArgs("--id", "999999")...)
	require.ErrorContains(t, err, "not found")

	// --all in auto mode: the decodable one is repaired, the undecodable
	// one re-produced to the topic.
	out, err = b.run(replayArgs("--all")...)
	require.NoError(t, err)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+u2:c1\s+repaired$`, id2), out)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+u3:c1\s+produced$`, garbage), out)
	require.Contains(t, out, "2 replayed, 0 failed")
	pg, rd = b.both(k2)
	require.NotNil(t, pg)
	require.NotNil(t, rd)
	require.Equal(t, int64(4), pg.Read.Position.Seq)
	require.Equal(t, int64(4), rd.Read.Position.Seq)

	// Produce mode re-produces even a decodable record, without repairing.
	k4 := receipt.Key{User: "u4", Channel: "c1"}
	id4 := b.parkState(state(k4.User, k4.Channel, 3, 3), 4)
	out, err = b.run(replayArgs("--id", strconv.FormatInt(id4, 10), "--mode", "produce")...)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d\tproduced\n", id4), out)
	pg, rd = b.both(k4)
	require.Nil(t, pg, "produce mode leaves the repair to the persister")
	require.Nil(t, rd)

	got := consumeN(t, broker, 2)
	from := map[int64]string{}
	for _, r := range got {
		from[event.ParseDeadLetter(r).ReplayedFrom] = string(r.Key)
	}
	require.Equal(t, map[int64]string{garbage: "u3:c1", id4: "u4:c1"}, from)

	// Nothing pending is left; a second --all has nothing to do.
	out, err = b.run(replayArgs("--all")...)
	require.NoError(t, err)
	require.Contains(t, out, "0 replayed, 0 failed")

	// Repair-only mode cannot replay what it cannot decode: it fails, says
	// which, and the record stays parked.
	bad := b.park([]byte("u5:c1"), []byte("\xff\xff"), 5, "undecodable record")
	out, err = b.run(replayArgs("--all", "--mode", "repair")...)
	require.ErrorContains(t, err, "1 parked record(s) could not be replayed")
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+u5:c1\s+failed: `, bad), out)
	require.Contains(t, out, "0 replayed, 1 failed (still parked)")
	out, err = b.run(append([]string{"dlt", "list"}, b.pgArgs...)...)
	require.NoError(t, err)
	require.Equal(t, []int64{bad}, listedIDs(out), out)
}

// consumeN reads exactly n records from the broker's main topic.
func consumeN(t *testing.T, broker *kafkatest.Broker, n int) []*kgo.Record {
	t.Helper()
	cl := broker.Client(t, kgo.ConsumeTopics(broker.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n && ctx.Err() == nil {
		got = append(got, cl.PollFetches(ctx).Records()...)
	}
	require.Len(t, got, n)
	return got
}

// sweepRow returns the FOUND and REPAIRED numbers of a direction in a sweep
// report.
func sweepRow(t *testing.T, out, direction string) (found, repaired int) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(direction) + `(?: \(→ \w+\))?\s+(\d+)\s+(\d+)\s*$`).FindStringSubmatch(out)
	require.NotNil(t, m, "no %s row in:\n%s", direction, out)
	found, _ = strconv.Atoi(m[1])
	repaired, _ = strconv.Atoi(m[2])
	return found, repaired
}

func TestSweepCommandRepairsBothWaysAndReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newDLTBundle(t)

	same := state("s1", "same", 3, 3)
	pgAhead := receipt.Key{User: "s2", Channel: "pg-ahead"}
	redisAhead := receipt.Key{User: "s3", Channel: "redis-ahead"}
	redisMissing := receipt.Key{User: "s4", Channel: "only-pg"}
	pgMissing := receipt.Key{User: "s5", Channel: "only-redis"}
	_, err := cursors.NewPostgres(b.pg).Upsert(ctx, []receipt.State{
		same,
		state(pgAhead.User, pgAhead.Channel, 9, 9),
		state(redisAhead.User, redisAhead.Channel, 2, 2),
		state(redisMissing.User, redisMissing.Channel, 6, 6),
	})
	require.NoError(t, err)
	_, err = cursors.NewStore(b.rs).Merge(ctx, []receipt.State{
		same,
		state(pgAhead.User, pgAhead.Channel, 4, 4),
		state(redisAhead.User, redisAhead.Channel, 8, 8),
		state(pgMissing.User, pgMissing.Channel, 5, 5),
	})
	require.NoError(t, err)

	args := append(append([]string{"sweep", "--pages-per-second", "1000"}, b.pgArgs...), b.redisArgs...)
	out, err := b.run(args...)
	require.NoError(t, err, out)
	for dir, want := range map[string]int{
		"redis_ahead": 1, "postgres_ahead": 1, "redis_missing": 1, "postgres_missing": 1, "total": 4,
	} {
		found, repaired := sweepRow(t, out, dir)
		require.Equal(t, want, found, "found %s:\n%s", dir, out)
		require.Equal(t, want, repaired, "repaired %s:\n%s", dir, out)
	}
	require.Regexp(t, `sweep took \S+: 4 Postgres rows, 5 Redis users \(5 fields\), \d+ pages`, out)
	require.Contains(t, out, "in flight (left alone): 0, invalid Redis fields: 0, failed repairs: 0")
	require.Regexp(t, `found read_receipts redis_ahead \{User:s3 Channel:redis-ahead\}: postgres .*Seq:2.*, redis .*Seq:8`, out)
	require.Equal(t, 4, strings.Count(out, "\nfound "), "one line per disagreement (at most drift.MaxSamples):\n%s", out)

	// Both stores now agree on every key, at the max of both.
	for k, seq := range map[receipt.Key]int64{same.Key: 3, pgAhead: 9, redisAhead: 8, redisMissing: 6, pgMissing: 5} {
		pg, rd := b.both(k)
		require.NotNil(t, pg, "%v in postgres", k)
		require.NotNil(t, rd, "%v in redis", k)
		require.True(t, pg.SameCursors(*rd), "%v: postgres %+v, redis %+v", k, pg, rd)
		require.Equal(t, seq, pg.Read.Position.Seq, "%v", k)
	}

	// "dlt sweep" is the same command; nothing is left to repair.
	out, err = b.run(append([]string{"dlt"}, args...)...)
	require.NoError(t, err, out)
	found, repaired := sweepRow(t, out, "total")
	require.Zero(t, found, out)
	require.Zero(t, repaired, out)
}
