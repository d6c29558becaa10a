package spool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/spool"
)

// BenchmarkAppend measures group commit: appenders call Append concurrently
// with ~150-byte records (key and value), each call returning after fsync.
// One op is one record; records/s is the figure to compare with
// BenchmarkFsync's fsyncs/s from the same run (their ratio is the average
// group size).
//
//	go test -run '^$' -bench 'Append|Fsync' -benchtime 5s ./pkg/spool/
func BenchmarkAppend(b *testing.B) {
	for _, tc := range []struct{ appenders, perCall int }{{8, 1}, {64, 1}, {512, 1}, {8, 100}} {
		b.Run(fmt.Sprintf("appenders=%d/records_per_call=%d", tc.appenders, tc.perCall), func(b *testing.B) {
			s, err := spool.Open(spool.Config{Dir: b.TempDir(), MaxBytes: 8 << 30})
			require.NoError(b, err)
			defer s.Close()
			group := make([]spool.Record, tc.perCall)
			for i := range group {
				group[i] = spool.Record{Key: []byte("user-000042:chan-0007"), Value: make([]byte, 129)}
			}
			var taken atomic.Int64
			var wg sync.WaitGroup
			b.SetBytes(150)
			b.ResetTimer()
			for range tc.appenders {
				wg.Go(func() {
					per := int64(tc.perCall)
					for {
						start := taken.Add(per) - per
						if start >= int64(b.N) {
							return
						}
						if err := s.Append(group[:min(per, int64(b.N)-start)]...); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			require.Equal(b, int64(b.N), s.Stats().Records)
		})
	}
}

// BenchmarkFsync is the bound Append shares: one 162-byte write plus fsync
// on the same file system, one at a time.
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	require.NoError(b, err)
	defer f.Close()
	buf := make([]byte, 162)
	for b.Loop() {
		_, err := f.Write(buf)
		require.NoError(b, err)
		require.NoError(b, f.Sync())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}
