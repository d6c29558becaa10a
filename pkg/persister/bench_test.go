package persister

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/batch"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// benchBatch is the default batch: MaxPollRecordsDefault rows.
const benchBatch = MaxPollRecordsDefault

// benchRows returns n batches of benchBatch states with random keys.
func benchRows(n int) [][]receipt.State {
	r := rand.New(rand.NewPCG(42, uint64(n)))
	out := make([][]receipt.State, n)
	for i := range out {
		out[i] = make([]receipt.State, benchBatch)
		for j := range out[i] {
			seq := 1 + r.Int64N(1_000_000)
			out[i][j] = receipt.State{
				Key:             receipt.Key{User: fmt.Sprintf("user-%016x", r.Uint64()), Channel: fmt.Sprintf("chan-%08x", r.Uint32())},
				Read:            receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: fmt.Sprintf("msg-%d", seq)},
				Delivered:       receipt.Cursor{Position: receipt.Position{Seq: seq + 1}, MessageID: fmt.Sprintf("msg-%d", seq+1)},
				DeviceID:        "device-1",
				UpdatedAtUnixMs: 1_700_000_000_000 + seq,
			}
		}
	}
	return out
}

func truncate(b *testing.B, s *pgtest.Schema) {
	b.Helper()
	_, err := s.Store.Pool().Exec(context.Background(), `TRUNCATE read_receipts`)
	require.NoError(b, err)
}

// reportRowsPerSecond adds rows/s; ns/op stays per batch of benchBatch rows.
func reportRowsPerSecond(b *testing.B) {
	b.ReportMetric(float64(benchBatch*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkWritePath times the persister's write path for one batch: the
// in-batch dedupe and the one-statement max-merge upsert in one
// transaction (pgstore.Upsert), into an emptied table each time.
func BenchmarkWritePath(b *testing.B) {
	s := pgtest.NewSchema(b)
	ctx := context.Background()
	batches := benchRows(b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		truncate(b, s)
		b.StartTimer()
		rows := batch.Dedupe(batches[i], stateKey, mergeStates)
		n, err := s.Store.Upsert(ctx, rows)
		if err != nil {
			b.Fatal(err)
		}
		if n != benchBatch {
			b.Fatalf("upserted %d rows, want %d", n, benchBatch)
		}
	}
	reportRowsPerSecond(b)
}

// BenchmarkCopyBaseline is the floor to compare with: a plain COPY of the
// same rows into the same (emptied) table, with no merge at all.
func BenchmarkCopyBaseline(b *testing.B) {
	s := pgtest.NewSchema(b)
	ctx := context.Background()
	batches := benchRows(b.N)
	cols := []string{"user_id", "channel_id", "read_epoch", "read_seq", "read_message_id",
		"delivered_epoch", "delivered_seq", "delivered_message_id", "device_id", "updated_at"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		truncate(b, s)
		b.StartTimer()
		rows := batches[i]
		n, err := s.Store.Pool().CopyFrom(ctx, pgx.Identifier{"read_receipts"}, cols,
			pgx.CopyFromSlice(len(rows), func(j int) ([]any, error) {
				st := rows[j]
				return []any{st.Key.User, st.Key.Channel,
					st.Read.Position.Epoch, st.Read.Position.Seq, st.Read.MessageID,
					st.Delivered.Position.Epoch, st.Delivered.Position.Seq, st.Delivered.MessageID,
					st.DeviceID, time.UnixMilli(st.UpdatedAtUnixMs)}, nil
			}))
		if err != nil {
			b.Fatal(err)
		}
		if n != benchBatch {
			b.Fatalf("copied %d rows, want %d", n, benchBatch)
		}
	}
	reportRowsPerSecond(b)
}
