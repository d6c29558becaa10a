package persister

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

const (
	// benchBatch is the default batch: MaxPollRecordsDefault rows.
	benchBatch = MaxPollRecordsDefault
	// benchTable is how many rows the table holds before a benchmark
	// starts, so that index descents and page touches are not a toy's.
	benchTable = 200_000
	// Prefilled seqs lie in [benchSeqLow, benchSeqHigh): a stale row
	// (below) never advances, an advancing one (above) always does.
	benchSeqLow, benchSeqHigh = 1_000, 1_000_000
)

var benchCols = []string{"user_id", "channel_id", "read_epoch", "read_seq", "read_message_id",
	"delivered_epoch", "delivered_seq", "delivered_message_id", "device_id", "updated_at"}

func benchState(key receipt.Key, seq int64) receipt.State {
	return receipt.State{
		Key:             key,
		Read:            receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: fmt.Sprintf("msg-%d", seq)},
		Delivered:       receipt.Cursor{Position: receipt.Position{Seq: seq + 1}, MessageID: fmt.Sprintf("msg-%d", seq+1)},
		DeviceID:        "device-1",
		UpdatedAtUnixMs: 1_700_000_000_000 + seq,
	}
}

func randomKey(r *rand.Rand) receipt.Key {
	return receipt.Key{User: fmt.Sprintf("user-%016x", r.Uint64()), Channel: fmt.Sprintf("chan-%08x", r.Uint32())}
}

// freshRows returns n batches of benchBatch states with new random keys.
func freshRows(r *rand.Rand, n int) [][]receipt.State {
	out := make([][]receipt.State, n)
	for i := range out {
		out[i] = make([]receipt.State, benchBatch)
		for j := range out[i] {
			out[i][j] = benchState(randomKey(r), benchSeqLow+r.Int64N(benchSeqHigh-benchSeqLow))
		}
	}
	return out
}

// copyRows COPYs rows into read_receipts in one statement (one
// transaction).
func copyRows(ctx context.Context, s *pgtest.Schema, rows []receipt.State) (int64, error) {
	return s.Store.Pool().CopyFrom(ctx, pgx.Identifier{"read_receipts"}, benchCols,
		pgx.CopyFromSlice(len(rows), func(j int) ([]any, error) {
			st := rows[j]
			return []any{st.Key.User, st.Key.Channel,
				st.Read.Position.Epoch, st.Read.Position.Seq, st.Read.MessageID,
				st.Delivered.Position.Epoch, st.Delivered.Position.Seq, st.Delivered.MessageID,
				st.DeviceID, time.UnixMilli(st.UpdatedAtUnixMs)}, nil
		}))
}

// prefill fills a fresh schema with benchTable random rows, vacuumed and
// analysed, and returns their keys.
func prefill(b *testing.B, r *rand.Rand) (*pgtest.Schema, []receipt.Key) {
	b.Helper()
	s := pgtest.NewSchema(b)
	ctx := context.Background()
	keys := make([]receipt.Key, 0, benchTable)
	for _, chunk := range freshRows(r, benchTable/benchBatch) {
		for _, st := range chunk {
			keys = append(keys, st.Key)
		}
	}
	rows := make([]receipt.State, len(keys))
	for i, k := range keys {
		rows[i] = benchState(k, benchSeqLow+r.Int64N(benchSeqHigh-benchSeqLow))
	}
	n, err := copyRows(ctx, s, rows)
	require.NoError(b, err)
	require.EqualValues(b, benchTable, n)
	_, err = s.Store.Pool().Exec(ctx, `VACUUM ANALYZE read_receipts`)
	require.NoError(b, err)
	return s, keys
}

// checkpoint starts every timed run in the same state: right after a
// checkpoint, so each pays the full-page writes of the pages it touches
// first (as the design's LIMITS figures do), whichever ran before it.
func checkpoint(b *testing.B, s *pgtest.Schema) {
	b.Helper()
	_, err := s.Store.Pool().Exec(context.Background(), `CHECKPOINT`)
	require.NoError(b, err)
}

// reportRowsPerSecond adds rows/s; ns/op stays per batch of benchBatch rows.
func reportRowsPerSecond(b *testing.B) {
	b.ReportMetric(float64(benchBatch*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkWritePath times the persister's write path for one batch (the
// in-batch dedupe, then Persister.write: the rows split by user into
// Writers shards, each a one-statement max-merge upsert in its own
// transaction, concurrently), with 1, 2 and 4 writers. Each batch holds
// benchBatch distinct keys drawn at random from the benchTable rows
// already in the table; half of them advance their cursors, half are
// stale and change nothing (the design's LIMITS PG-U workload).
func BenchmarkWritePath(b *testing.B) {
	r := rand.New(rand.NewPCG(42, 1))
	s, keys := prefill(b, r)
	ctx := context.Background()
	// Advancing seqs only grow, across every run on this table.
	next := int64(2 * benchSeqHigh)
	batches := func(n int) [][]receipt.State {
		out := make([][]receipt.State, n)
		for i := range out {
			seen := make(map[int]bool, benchBatch)
			out[i] = make([]receipt.State, 0, benchBatch)
			for len(out[i]) < benchBatch {
				k := r.IntN(len(keys))
				if seen[k] {
					continue
				}
				seen[k] = true
				seq := 1 + r.Int64N(benchSeqLow-1)
				if r.IntN(2) == 0 {
					next++
					seq = next
				}
				out[i] = append(out[i], benchState(keys[k], seq))
			}
		}
		return out
	}
	for _, writers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			p := newWriter(s.Store, writers)
			work := batches(b.N)
			checkpoint(b, s)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rows := work[i]
				slices.SortFunc(rows, receipt.CompareStates)
				n, rejected, err := p.write(ctx, rows)
				if err != nil {
					b.Fatal(err)
				}
				if n != benchBatch || len(rejected) > 0 {
					b.Fatalf("wrote %d rows and %d rejected, want %d and none", n, len(rejected), benchBatch)
				}
			}
			reportRowsPerSecond(b)
		})
	}
}

// BenchmarkCopyBaseline is the bound to compare with: a plain COPY of
// benchBatch fresh random-key rows per transaction, with no merge at all,
// into a table prefilled like BenchmarkWritePath's.
func BenchmarkCopyBaseline(b *testing.B) {
	r := rand.New(rand.NewPCG(42, 2))
	s, _ := prefill(b, r)
	ctx := context.Background()
	b.Run("one-conn", func(b *testing.B) {
		work := freshRows(r, b.N)
		checkpoint(b, s)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			n, err := copyRows(ctx, s, work[i])
			if err != nil {
				b.Fatal(err)
			}
			if n != benchBatch {
				b.Fatalf("copied %d rows, want %d", n, benchBatch)
			}
		}
		reportRowsPerSecond(b)
	})
}

// BenchmarkWindowWriteVsCopy is the "write path alone" figure: the
// rows of one window (windowBench fresh random keys) written by the
// persister's write path (statements of StatementRows, Writers at a
// time, of rows sorted beforehand: the poller sorts a window while the
// writer writes the previous one) beside a raw binary COPY of the same
// rows in their random order into the same, freshly truncated table, with
// one and with two connections, in the same iteration. It reports rows/s of each and
// write ÷ COPY (same iteration, then averaged).
func BenchmarkWindowWriteVsCopy(b *testing.B) {
	for _, stmt := range []int{500, 2000, 5000, 10000, 25000} {
		b.Run(fmt.Sprintf("statement=%d", stmt), func(b *testing.B) { benchWindowWrite(b, stmt) })
	}
}

func benchWindowWrite(b *testing.B, statementRows int) {
	const windowBench = 50_000
	r := rand.New(rand.NewPCG(42, 3))
	s := pgtest.NewSchema(b)
	ctx := context.Background()
	reset := func() {
		b.Helper()
		_, err := s.Store.Pool().Exec(ctx, `TRUNCATE read_receipts`)
		require.NoError(b, err)
		checkpoint(b, s)
	}
	var writeSecs, copy1Secs, copy2Secs float64
	var ratio1, ratio2 float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rows := make([]receipt.State, windowBench)
		for j := range rows {
			rows[j] = benchState(randomKey(r), benchSeqLow+r.Int64N(benchSeqHigh-benchSeqLow))
		}

		reset()
		start := time.Now()
		_, err := copyRows(ctx, s, rows)
		require.NoError(b, err)
		c1 := time.Since(start).Seconds()

		reset()
		start = time.Now()
		var wg sync.WaitGroup
		for half := range 2 {
			part := rows[half*windowBench/2 : (half+1)*windowBench/2]
			wg.Go(func() {
				_, err := copyRows(ctx, s, part)
				require.NoError(b, err)
			})
		}
		wg.Wait()
		c2 := time.Since(start).Seconds()

		reset()
		p := newWriter(s.Store, WritersDefault)
		p.cfg.StatementRows = statementRows
		window := slices.Clone(rows)
		slices.SortFunc(window, receipt.CompareStates)
		b.StartTimer()
		start = time.Now()
		n, rejected, err := p.write(ctx, window)
		w := time.Since(start).Seconds()
		b.StopTimer()
		require.NoError(b, err)
		require.Equal(b, windowBench, n)
		require.Empty(b, rejected)

		writeSecs, copy1Secs, copy2Secs = writeSecs+w, copy1Secs+c1, copy2Secs+c2
		ratio1, ratio2 = ratio1+c1/w, ratio2+c2/w
	}
	n := float64(b.N)
	b.ReportMetric(windowBench*n/writeSecs, "write-rows/s")
	b.ReportMetric(windowBench*n/copy1Secs, "copy1-rows/s")
	b.ReportMetric(windowBench*n/copy2Secs, "copy2-rows/s")
	b.ReportMetric(ratio1/n, "write/copy1")
	b.ReportMetric(ratio2/n, "write/copy2")
}
