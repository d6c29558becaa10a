package spool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzReader")

// validSegment is a segment file with a few records, one with an empty key
// and one with an empty value.
func validSegment() []byte {
	b := []byte(segmentMagic)
	for _, r := range []Record{
		{Key: []byte("user-1:chan-9"), Value: []byte("event payload")},
		{Key: []byte{}, Value: []byte("no key")},
		{Key: []byte("no value"), Value: []byte{}},
		{Key: []byte("k"), Value: bytes.Repeat([]byte{0xa5}, 300)},
	} {
		b = appendFrame(b, r)
	}
	return b
}

func fuzzSeeds() map[string][]byte {
	valid := validSegment()
	flipped := bytes.Clone(valid)
	flipped[len(segmentMagic)+frameHeaderSize+2] ^= 0x10
	return map[string][]byte{
		"valid":       valid,
		"torn":        valid[:len(valid)-7],
		"torn-header": valid[:len(segmentMagic)+3],
		"empty":       {},
		"header-only": []byte(segmentMagic),
		"flipped":     flipped,
		"zero-tail":   append(bytes.Clone(valid), make([]byte, 64)...),
	}
}

// TestWriteFuzzSeeds rewrites the committed seed corpus when run with
// -update-fuzz-seeds (after a format change).
func TestWriteFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("run with -update-fuzz-seeds to rewrite testdata/fuzz/FuzzReader")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, b := range fuzzSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
}

// FuzzReader feeds arbitrary bytes to the segment reader as a segment file.
// It must never panic, must stop at the first byte that is not a whole valid
// frame, and may yield only frames whose CRC matches: each yielded record,
// encoded again, is byte for byte the input at its offset, and the CRC stored
// there is checked independently of the reader's code.
func FuzzReader(f *testing.F) {
	table := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, data []byte) {
		type frame struct {
			off int64
			rec Record
		}
		var got []frame
		validEnd, err := scanSegment(bytes.NewReader(data), int64(len(data)), func(off int64, r Record) {
			got = append(got, frame{off, Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}})
		})
		require.LessOrEqual(t, validEnd, int64(len(data)))
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		} else {
			require.Equal(t, int64(len(data)), validEnd, "no error means the whole input is valid")
		}
		if len(data) < int(headerSize) || !bytes.Equal(data[:headerSize], []byte(segmentMagic)) {
			require.Zero(t, validEnd)
			require.Empty(t, got)
			return
		}

		off := headerSize
		for _, fr := range got {
			require.Equal(t, off, fr.off, "frames are contiguous")
			enc := appendFrame(nil, fr.rec)
			end := off + int64(len(enc))
			require.LessOrEqual(t, end, validEnd)
			require.Equal(t, enc, data[off:end])
			n := binary.LittleEndian.Uint32(data[off:])
			require.Equal(t, int64(n), end-off-frameHeaderSize)
			want := crc32.Update(crc32.Checksum(data[off:off+4], table), table, data[off+frameHeaderSize:end])
			require.Equal(t, want, binary.LittleEndian.Uint32(data[off+4:]))
			off = end
		}
		require.Equal(t, validEnd, off, "the valid prefix is exactly the yielded frames")

		// The reader behind Next, over the valid prefix, yields the same
		// records and ends cleanly.
		fr := newFrameReader(nil, bytes.NewReader(data), headerSize, validEnd)
		for i := 0; ; i++ {
			r, err := fr.next()
			if errors.Is(err, io.EOF) {
				require.Len(t, got, i)
				break
			}
			require.NoError(t, err)
			require.Less(t, i, len(got))
			require.Equal(t, got[i].rec, r)
		}
	})
}

func TestFuzzSeedsAreCommitted(t *testing.T) {
	t.Parallel()
	for name := range fuzzSeeds() {
		_, err := os.Stat(filepath.Join("testdata", "fuzz", "FuzzReader", name))
		require.NoError(t, err, "run go test -run TestWriteFuzzSeeds -update-fuzz-seeds ./pkg/spool/")
	}
}

// A torn write of the newest checkpoint slot leaves the previous one.
func TestCheckpointFallsBackToOtherSlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, _, ok, lost, err := openCheckpoint(dir)
	require.NoError(t, err)
	require.False(t, ok)
	require.False(t, lost)
	require.NoError(t, c.write(position{seg: 3, off: 100}))
	require.NoError(t, c.write(position{seg: 4, off: 200}))
	require.NoError(t, c.close())

	c, p, ok, lost, err := openCheckpoint(dir)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, lost)
	require.Equal(t, position{seg: 4, off: 200}, p)
	require.NoError(t, c.close())

	path := filepath.Join(dir, checkpointName)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	const secondWriteSlot = 0 // write n goes to slot n%2
	b[secondWriteSlot*checkpointSlot+15] ^= 1
	require.NoError(t, os.WriteFile(path, b, 0o600))
	c, p, ok, lost, err = openCheckpoint(dir)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, lost)
	require.Equal(t, position{seg: 3, off: 100}, p)
	// The next write replaces the damaged slot, not the good one.
	require.NoError(t, c.write(position{seg: 5, off: 300}))
	require.NoError(t, c.close())
	c, p, _, _, err = openCheckpoint(dir)
	require.NoError(t, err)
	require.Equal(t, position{seg: 5, off: 300}, p)
	require.NoError(t, c.close())

	b[checkpointSlot+15] ^= 1 // now both slots are bad
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, _, ok, lost, err = openCheckpoint(dir)
	require.NoError(t, err)
	require.False(t, ok)
	require.True(t, lost)
}
