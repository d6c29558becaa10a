package spool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/spool"
)

// headerSize is the segment header length (the format is in doc.go).
const headerSize = 8

func rec(i int) spool.Record {
	return spool.Record{Key: fmt.Appendf(nil, "k%06d", i), Value: fmt.Appendf(nil, "value-%06d", i)}
}

// recSize is the on-disk size of rec(i).
var recSize = int64(spool.FrameOverhead + 7 + 12)

func recs(from, to int) []spool.Record {
	var out []spool.Record
	for i := from; i < to; i++ {
		out = append(out, rec(i))
	}
	return out
}

func open(t *testing.T, cfg spool.Config) *spool.Spool {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := spool.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func drainAll(t *testing.T, s *spool.Spool) []spool.Record {
	t.Helper()
	var got []spool.Record
	_, err := s.Drain(context.Background(), func(b []spool.Record) error {
		got = append(got, b...)
		return nil
	})
	require.NoError(t, err)
	return got
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	require.NoError(t, err)
	return files
}

func TestAppendReplaysInOrderAcrossSegments(t *testing.T) {
	t.Parallel()
	// About ten records per segment, read in batches that straddle them.
	s := open(t, spool.Config{SegmentBytes: 10 * recSize, ReadBatchRecords: 7})
	want := recs(0, 250)
	for i := 0; i < len(want); {
		n := min(1+i%4, len(want)-i)
		require.NoError(t, s.Append(want[i:i+n]...))
		i += n
	}
	st := s.Stats()
	require.Equal(t, int64(250), st.Records)
	require.Greater(t, st.Segments, 20)

	var batches int
	got := []spool.Record{}
	n, err := s.Drain(context.Background(), func(b []spool.Record) error {
		require.LessOrEqual(t, len(b), 7)
		batches++
		got = append(got, b...)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 250, n)
	require.Equal(t, 36, batches)
	require.Equal(t, want, got)
	require.Equal(t, spool.Stats{MaxBytes: spool.MaxBytesDefault}, s.Stats(), "a drained spool holds no segment")

	// Appends after a full drain start a fresh segment and keep flowing.
	require.NoError(t, s.Append(rec(1000)))
	require.Equal(t, []spool.Record{rec(1000)}, drainAll(t, s))
}

func TestFullRejectsWholeAppendAndDrainFreesSpace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		segmentBytes int64
	}{
		{"many segments", 8 * recSize},
		{"bound below one segment", 1 << 20}, // only retiring the drained active segment frees space
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			maxBytes := 40*recSize + 10*headerSize
			s := open(t, spool.Config{MaxBytes: maxBytes, SegmentBytes: tc.segmentBytes, MaxRecordBytes: 100})
			var accepted []spool.Record
			i := 0
			for ; ; i++ {
				err := s.Append(rec(i))
				if errors.Is(err, spool.ErrFull) {
					break
				}
				require.NoError(t, err)
				accepted = append(accepted, rec(i))
			}
			require.GreaterOrEqual(t, len(accepted), 30)
			st := s.Stats()
			require.LessOrEqual(t, st.Bytes, maxBytes)
			require.Greater(t, st.Bytes+recSize+headerSize, maxBytes)

			// A group that does not fit is refused whole, even when a
			// part of it would.
			err := s.Append(spool.Record{Key: []byte("x")}, rec(i))
			require.ErrorIs(t, err, spool.ErrFull)
			require.Equal(t, st, s.Stats())

			require.Equal(t, accepted, drainAll(t, s), "nothing accepted is lost, nothing refused is stored")
			require.Equal(t, spool.Stats{MaxBytes: maxBytes}, s.Stats())

			// The freed space takes as much again.
			for j := range accepted {
				require.NoError(t, s.Append(rec(j)), "append %d after drain", j)
			}
			require.Len(t, drainAll(t, s), len(accepted))
		})
	}
}

func TestRecordTooLarge(t *testing.T) {
	t.Parallel()
	s := open(t, spool.Config{MaxRecordBytes: 100})
	err := s.Append(rec(1), spool.Record{Key: []byte("k"), Value: make([]byte, 100)})
	require.ErrorIs(t, err, spool.ErrTooLarge)
	require.NoError(t, s.Append(spool.Record{Key: []byte("k"), Value: make([]byte, 99)}))
	require.Equal(t, int64(1), s.Stats().Records, "the refused call stored nothing")
}

func TestReopenReplaysPendingRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := spool.Config{Dir: dir, SegmentBytes: 10 * recSize, ReadBatchRecords: 15}
	s, err := spool.Open(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Append(recs(0, 100)...))

	// Commit one batch; read a second and crash before committing it.
	b, commit, err := s.Next(context.Background())
	require.NoError(t, err)
	require.Equal(t, recs(0, 15), b)
	require.NoError(t, commit())
	b, _, err = s.Next(context.Background())
	require.NoError(t, err)
	require.Equal(t, recs(15, 30), b)
	require.NoError(t, s.Close())

	s, err = spool.Open(cfg)
	require.NoError(t, err)
	require.Equal(t, spool.Recovery{Records: 85, Segments: s.Stats().Segments}, s.Recovery())
	require.Equal(t, int64(85), s.Stats().Records)
	// Records appended after the restart come after the old ones.
	require.NoError(t, s.Append(recs(100, 110)...))
	require.Equal(t, recs(15, 110), drainAll(t, s))
	require.NoError(t, s.Close())

	s = open(t, cfg)
	require.Equal(t, spool.Recovery{}, s.Recovery())
	require.Empty(t, segmentFiles(t, dir))
}

// The checkpoint keeps pointing into a segment that a full drain removed; a
// segment created later must get a larger id or its records would be skipped
// after the next restart.
func TestSegmentIDsNeverReuseTheCheckpointedOne(t *testing.T) {
	t.Parallel()
	cfg := spool.Config{Dir: t.TempDir()}
	reopen := func(s *spool.Spool) *spool.Spool {
		t.Helper()
		require.NoError(t, s.Close())
		s, err := spool.Open(cfg)
		require.NoError(t, err)
		return s
	}
	s, err := spool.Open(cfg)
	require.NoError(t, err)
	for round := range 3 {
		require.NoError(t, s.Append(rec(round)))
		s = reopen(s)
		require.Equal(t, int64(1), s.Recovery().Records, "round %d", round)
		require.Equal(t, []spool.Record{rec(round)}, drainAll(t, s))
		s = reopen(s)
		require.Equal(t, int64(0), s.Recovery().Records, "round %d", round)
	}
	require.NoError(t, s.Close())
}

func TestDrainWithFailingSendKeepsRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := spool.Config{Dir: dir, SegmentBytes: 10 * recSize, ReadBatchRecords: 10}
	s, err := spool.Open(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Append(recs(0, 50)...))

	errDown := errors.New("kafka down")
	var sent []spool.Record
	calls := 0
	n, err := s.Drain(context.Background(), func(b []spool.Record) error {
		calls++
		if calls == 3 {
			return errDown
		}
		sent = append(sent, b...)
		return nil
	})
	require.ErrorIs(t, err, errDown)
	require.Equal(t, 20, n)
	require.Equal(t, recs(0, 20), sent)
	require.Equal(t, int64(30), s.Stats().Records)

	// The failed batch comes first next time, here after a restart.
	require.NoError(t, s.Close())
	s = open(t, cfg)
	require.Equal(t, recs(20, 50), drainAll(t, s))
}

func TestCommitIsIdempotentAndRejectsStaleBatches(t *testing.T) {
	t.Parallel()
	s := open(t, spool.Config{ReadBatchRecords: 2})
	require.NoError(t, s.Append(recs(0, 6)...))
	ctx := context.Background()

	_, commitA, err := s.Next(ctx)
	require.NoError(t, err)
	_, commitB, err := s.Next(ctx) // the same batch, read again
	require.NoError(t, err)
	require.NoError(t, commitA())
	require.NoError(t, commitA())
	require.NoError(t, commitB(), "already committed")
	require.Equal(t, int64(4), s.Stats().Records)

	b, commitC, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, recs(2, 4), b)
	_, err = s.Drain(ctx, func([]spool.Record) error { return nil })
	require.NoError(t, err)
	// commitC's batch was committed by the drain: nothing to do.
	require.NoError(t, commitC())
	require.Equal(t, int64(0), s.Stats().Records)

	require.NoError(t, s.Append(recs(10, 14)...))
	_, stale, err := s.Next(ctx)
	require.NoError(t, err)
	_, commitD, err := s.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, commitD())
	b, commitE, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, recs(12, 14), b)
	require.NoError(t, commitE())
	require.NoError(t, stale(), "covered by later commits")
}

func TestNextWaitsForAppendsAndClose(t *testing.T) {
	t.Parallel()
	s := open(t, spool.Config{})
	ctx := context.Background()

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err := s.Next(cctx)
	require.ErrorIs(t, err, context.Canceled)

	got := make(chan []spool.Record, 1)
	go func() {
		b, commit, err := s.Next(ctx)
		if err == nil {
			err = commit()
		}
		if err != nil {
			b = nil
		}
		got <- b
	}()
	require.NoError(t, s.Append(rec(1)))
	select {
	case b := <-got:
		require.Equal(t, []spool.Record{rec(1)}, b)
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after an append")
	}

	errs := make(chan error, 1)
	go func() {
		_, _, err := s.Next(ctx)
		errs <- err
	}()
	require.NoError(t, s.Close())
	select {
	case err := <-errs:
		require.ErrorIs(t, err, spool.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after Close")
	}
	require.ErrorIs(t, s.Append(rec(2)), spool.ErrClosed)
	require.NoError(t, s.Close())
}

func TestOneSpoolPerDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, spool.Config{Dir: dir})
	_, err := spool.Open(spool.Config{Dir: dir})
	require.ErrorIs(t, err, spool.ErrLocked)
	require.NoError(t, s.Close())
	open(t, spool.Config{Dir: dir})
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	_, err := spool.Open(spool.Config{MaxBytes: 100, MaxRecordBytes: 1 << 30})
	require.Error(t, err)
	require.ErrorContains(t, err, "Dir is required")
	require.ErrorContains(t, err, "MaxRecordBytes")
	require.ErrorContains(t, err, "MaxBytes 100")
}

// Many appenders race each other and a reader; every record comes out
// exactly once, and each appender's records in the order it appended them.
func TestConcurrentAppendersKeepPerAppenderOrder(t *testing.T) {
	t.Parallel()
	const appenders, perAppender = 16, 300
	s := open(t, spool.Config{SegmentBytes: 4 << 10, ReadBatchRecords: 50})

	var wg sync.WaitGroup
	for a := range appenders {
		wg.Go(func() {
			for i := 0; i < perAppender; {
				n := min(1+(a+i)%3, perAppender-i)
				var group []spool.Record
				for j := range n {
					group = append(group, spool.Record{Key: fmt.Appendf(nil, "a%02d", a), Value: fmt.Appendf(nil, "%06d", i+j)})
				}
				if err := s.Append(group...); err != nil {
					t.Errorf("appender %d: %v", a, err)
					return
				}
				i += n
			}
		})
	}

	next := map[string]int{}
	total := 0
	check := func(b []spool.Record) error {
		for _, r := range b {
			var seq int
			if _, err := fmt.Sscanf(string(r.Value), "%d", &seq); err != nil {
				return err
			}
			if seq != next[string(r.Key)] {
				return fmt.Errorf("%s: got %d, want %d", r.Key, seq, next[string(r.Key)])
			}
			next[string(r.Key)]++
			total++
		}
		return nil
	}
	appended := make(chan struct{})
	go func() { wg.Wait(); close(appended) }()
	ctx := context.Background()
	for done := false; !done; {
		select {
		case <-appended:
			done = true
		default:
		}
		_, err := s.Drain(ctx, check)
		require.NoError(t, err)
	}
	_, err := s.Drain(ctx, check)
	require.NoError(t, err)
	require.Equal(t, appenders*perAppender, total)
	for a := range appenders {
		require.Equal(t, perAppender, next[fmt.Sprintf("a%02d", a)])
	}
	require.Equal(t, int64(0), s.Stats().Records)
}

// spoolFiles writes n records, one Append each, with the given segment size,
// closes the spool, and returns its directory and segment files.
func spoolFiles(t *testing.T, n int, segmentBytes int64) (dir string, segs []string) {
	t.Helper()
	dir = t.TempDir()
	s, err := spool.Open(spool.Config{Dir: dir, SegmentBytes: segmentBytes})
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, s.Append(rec(i)))
	}
	require.NoError(t, s.Close())
	return dir, segmentFiles(t, dir)
}

// copyDir copies the spool files of src into a fresh directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
	return dst
}

func frameOff(i int) int64 { return headerSize + int64(i)*recSize }

// reopenDamaged opens dir after damage and checks that exactly the records
// before the damage come back, then that appends still follow them.
func reopenDamaged(t *testing.T, dir string, want []spool.Record, discarded int64) {
	t.Helper()
	s, err := spool.Open(spool.Config{Dir: dir})
	require.NoError(t, err)
	defer s.Close()
	rc := s.Recovery()
	require.Equal(t, int64(len(want)), rc.Records)
	require.Equal(t, discarded, rc.DiscardedBytes)
	require.Equal(t, min(discarded, 1), int64(rc.DamagedSegments))
	require.NoError(t, s.Append(rec(9999)))
	got := drainAll(t, s)
	require.Equal(t, append(append([]spool.Record{}, want...), rec(9999)), got)
}

func TestOpenTruncatesTornTail(t *testing.T) {
	t.Parallel()
	const n = 20
	src, segs := spoolFiles(t, n, 0)
	require.Len(t, segs, 1)
	size := frameOff(n)
	fi, err := os.Stat(segs[0])
	require.NoError(t, err)
	require.Equal(t, size, fi.Size())

	// Every cut inside the last two frames, a few earlier ones, and the
	// header itself.
	cuts := []int64{0, 3, headerSize, frameOff(5) + 1, frameOff(10) + 7}
	for c := frameOff(n - 2); c <= size; c++ {
		cuts = append(cuts, c)
	}
	for _, cut := range cuts {
		t.Run(fmt.Sprint("cut at ", cut), func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			require.NoError(t, os.Truncate(filepath.Join(dir, filepath.Base(segs[0])), cut))
			whole := 0
			if cut >= headerSize {
				whole = int((cut - headerSize) / recSize)
			}
			kept := frameOff(whole)
			if cut < headerSize {
				kept = 0 // no whole header: the file goes
			}
			reopenDamaged(t, dir, recs(0, whole), cut-kept)
		})
	}
}

func TestOpenTruncatesAtCorruptFrame(t *testing.T) {
	t.Parallel()
	const n, bad = 20, 12
	src, segs := spoolFiles(t, n, 0)
	// Flip each byte of one frame in turn: its length, CRC, key length,
	// key and value. The CRC covers them all, so that frame is moved aside
	// to the .damaged file, and every frame before and after it is kept
	// (recovery resynchronises on the next valid frame).
	for b := frameOff(bad); b < frameOff(bad+1); b++ {
		t.Run(fmt.Sprint("byte ", b), func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			path := filepath.Join(dir, filepath.Base(segs[0]))
			orig, err := os.ReadFile(path)
			require.NoError(t, err)
			flipByte(t, path, b)
			reopenDamaged(t, dir, append(recs(0, bad), recs(bad+1, n)...), recSize)
			damaged, err := os.ReadFile(path + spool.DamagedSuffix)
			require.NoError(t, err)
			want := slices.Clone(orig[frameOff(bad):frameOff(bad+1)])
			want[b-frameOff(bad)] ^= 0xff
			require.Equal(t, want, damaged, "the damaged bytes are moved aside as they were")
		})
	}
	t.Run("header", func(t *testing.T) {
		t.Parallel()
		dir := copyDir(t, src)
		flipByte(t, filepath.Join(dir, filepath.Base(segs[0])), 2)
		reopenDamaged(t, dir, recs(0, n), headerSize)
	})
	t.Run("two damaged frames", func(t *testing.T) {
		t.Parallel()
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(segs[0]))
		flipByte(t, path, frameOff(3)+1)
		flipByte(t, path, frameOff(15)+9)
		reopenDamaged(t, dir, append(append(recs(0, 3), recs(4, 15)...), recs(16, n)...), 2*recSize)
	})
	t.Run("zeros after the last frame", func(t *testing.T) {
		t.Parallel()
		// What a file system may show after a crash: the size grew, the
		// data never arrived.
		dir := copyDir(t, src)
		f, err := os.OpenFile(filepath.Join(dir, filepath.Base(segs[0])), os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.Write(make([]byte, 4096))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		reopenDamaged(t, dir, recs(0, n), 4096)
	})
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[off] ^= 0xff
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// Damage in an older segment cannot come from a crash (it was sealed and
// fsynced); the spool keeps everything but the damaged frame: the frames
// before and after it and every later segment.
func TestOpenKeepsSegmentsAfterADamagedOne(t *testing.T) {
	t.Parallel()
	dir, segs := spoolFiles(t, 40, headerSize+10*recSize)
	require.Len(t, segs, 4)
	flipByte(t, segs[1], frameOff(3)+9) // record 10+3
	want := append(recs(0, 13), recs(14, 40)...)
	reopenDamaged(t, dir, want, recSize)
}

// Damage before the checkpoint's offset in its segment: the repaired
// segment's frames move, and the checkpoint moves with them, so neither
// this recovery nor one after a crash before any commit skips a record.
func TestDamageBeforeTheCheckpointSkipsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := spool.Config{Dir: dir, ReadBatchRecords: 10}
	s := open(t, cfg)
	for _, r := range recs(0, 20) {
		require.NoError(t, s.Append(r))
	}
	_, commit, err := s.Next(context.Background())
	require.NoError(t, err)
	require.NoError(t, commit()) // records 0..9 sent
	require.NoError(t, s.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	flipByte(t, segs[0], frameOff(2)+9) // a record already sent

	for range 2 { // the second open is a crash before any commit
		s = open(t, cfg)
		require.Equal(t, int64(10), s.Recovery().Records)
		require.NoError(t, s.Close())
	}
	s = open(t, cfg)
	require.Equal(t, recs(10, 20), drainAll(t, s))
}

// With the checkpoint unreadable, replay starts at the oldest segment still
// on disk: records may be sent twice, none is skipped.
func TestLostCheckpointReplaysFromOldestSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := spool.Config{Dir: dir, SegmentBytes: headerSize + 10*recSize, ReadBatchRecords: 15}
	s, err := spool.Open(cfg)
	require.NoError(t, err)
	for _, r := range recs(0, 30) { // one call is one group, never split across segments
		require.NoError(t, s.Append(r))
	}
	_, commit, err := s.Next(context.Background())
	require.NoError(t, err)
	require.NoError(t, commit()) // removes the first segment, stops 5 records into the second
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "checkpoint"), []byte("garbage"), 0o600))

	s = open(t, cfg)
	require.True(t, s.Recovery().CheckpointLost)
	require.Equal(t, recs(10, 30), drainAll(t, s))
}
