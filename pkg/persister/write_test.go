package persister

import (
	"context"
	"errors"
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// newWriter is a Persister with only its write path: no Kafka client, so
// it must not hit an outage (which pauses fetching).
func newWriter(store *pgstore.Store, writers int) *Persister {
	return newPersister(Config{Store: store, Writers: writers}.withDefaults())
}

func writeState(user, channel string, seq int64) receipt.State {
	return receipt.State{
		Key:             receipt.Key{User: user, Channel: channel},
		Read:            receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: fmt.Sprintf("m%d", seq)},
		DeviceID:        "dev-1",
		UpdatedAtUnixMs: 1_700_000_000_000 + seq,
	}
}

func histogramCount(t *testing.T, h interface{ Write(*dto.Metric) error }) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram().GetSampleCount()
}

func TestShardByUserKeepsAUserInOneShard(t *testing.T) {
	t.Parallel()
	var rows []receipt.State
	for u := range 4000 {
		for c := range 3 {
			rows = append(rows, writeState(fmt.Sprintf("user-%d", u), fmt.Sprintf("c%d", c), 1))
		}
	}
	require.Equal(t, [][]receipt.State{rows}, shardByUser(rows, 1), "one writer: the batch as it is")

	for _, n := range []int{2, 3, 4, 8} {
		shards := shardByUser(rows, n)
		require.Len(t, shards, n)
		seen := map[receipt.Key]bool{}
		userShard := map[string]int{}
		for i, sh := range shards {
			// A fair hash: 12000 rows of 4000 users spread evenly.
			require.InDelta(t, len(rows)/n, len(sh), float64(len(rows)/n)/5, "shard %d of %d", i, n)
			for _, r := range sh {
				require.False(t, seen[r.Key], "%v in two shards", r.Key)
				seen[r.Key] = true
				if s, ok := userShard[r.Key.User]; ok {
					require.Equal(t, s, i, "user %s split over shards", r.Key.User)
				}
				userShard[r.Key.User] = i
				require.Equal(t, i, shardOf(r.Key.User, n))
			}
		}
		require.Len(t, seen, len(rows), "every row in a shard")
	}
}

// A rejected row is bisected out of its own shard only: every other shard
// is written in one transaction, and the failing shard costs exactly what
// bisecting it alone costs.
func TestRejectedRowIsBisectedWithinItsShard(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	ctx := context.Background()
	_, err := s.Store.Pool().Exec(ctx, `ALTER TABLE read_receipts ADD CONSTRAINT test_reject_device CHECK (device_id <> 'reject-me')`)
	require.NoError(t, err)

	const writers = 4
	var rows []receipt.State
	for u := range 200 {
		rows = append(rows, writeState(fmt.Sprintf("g%d", u), "c", int64(u+1)))
	}
	bad := writeState("bad", "c", 5)
	bad.DeviceID = "reject-me"
	rows = append(rows[:77], append([]receipt.State{bad}, rows[77:]...)...)

	shards := shardByUser(rows, writers)
	badShard := shardOf("bad", writers)
	wantWrites := 0
	for i, sh := range shards {
		require.NotEmpty(t, sh, "shard %d", i)
		if i != badShard {
			wantWrites++
		}
	}
	rejectBad := func(part []receipt.State) error {
		for _, r := range part {
			if r.DeviceID == "reject-me" {
				return pgstore.ErrRejected
			}
		}
		return nil
	}
	alone, err := batch.Bisect(shards[badShard], rejectBad, isRejected)
	require.NoError(t, err)
	wantWrites += alone.Writes

	p := newWriter(s.Store, writers)
	written, rejected, err := p.write(ctx, rows)
	require.NoError(t, err)
	require.Equal(t, 200, written)
	require.Len(t, rejected, 1)
	require.Equal(t, bad.Key, rejected[0].key)
	require.True(t, errors.Is(rejected[0].err, pgstore.ErrRejected), rejected[0].err)
	require.EqualValues(t, wantWrites, histogramCount(t, p.m.upsertTime), "transactions")
	require.EqualValues(t, 1, histogramCount(t, p.m.writeTime))

	n, err := s.Store.Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 200, n)
}

// One writer is the old path: the batch in one transaction.
func TestOneWriterWritesTheBatchInOneTransaction(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	var rows []receipt.State
	for u := range 50 {
		rows = append(rows, writeState(fmt.Sprintf("w%d", u), "c", 3))
	}
	p := newWriter(s.Store, 1)
	written, rejected, err := p.write(context.Background(), rows)
	require.NoError(t, err)
	require.Equal(t, 50, written)
	require.Empty(t, rejected)
	require.EqualValues(t, 1, histogramCount(t, p.m.upsertTime))

	p4 := newWriter(s.Store, 4)
	_, _, err = p4.write(context.Background(), rows)
	require.NoError(t, err)
	require.EqualValues(t, 4, histogramCount(t, p4.m.upsertTime), "four writers: one transaction per shard")
}
