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
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzReader")

// validSegment is a segment file with a few records, one with an empty key,
// one with an empty value and two with headers.
func validSegment() []byte {
	b := []byte(segmentMagic)
	for _, r := range []Record{
		{Key: []byte("user-1:chan-9"), Value: []byte("event payload")},
		{Key: []byte{}, Value: []byte("no key")},
		{Key: []byte("no value"), Value: []byte{}},
		{Key: []byte("k"), Value: bytes.Repeat([]byte{0xa5}, 300)},
		{Key: []byte("traced"), Value: []byte("v"), Headers: []Header{
			{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
			{Key: "tracestate", Value: []byte("congo=t61rcWkgMzE")},
		}},
		{Key: []byte("empty header"), Value: []byte("v"), Headers: []Header{{Key: "", Value: []byte{}}}},
	} {
		b = appendFrame(b, r)
	}
	return b
}

// v1Segment is a segment of the first format: its magic, and frames
// without headers.
func v1Segment() []byte {
	b := []byte(segmentMagicV1)
	for _, r := range []Record{{Key: []byte("a:b"), Value: []byte("old")}, {Key: []byte{}, Value: []byte("x")}} {
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
		"v1":          v1Segment(),
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
			got = append(got, frame{off, cloneRecord(r)})
		})
		require.LessOrEqual(t, validEnd, int64(len(data)))
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		} else {
			require.Equal(t, int64(len(data)), validEnd, "no error means the whole input is valid")
		}
		if len(data) < int(headerSize) || !knownMagic(data[:headerSize]) {
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

// cloneRecord is r with its own copies of r's bytes.
func cloneRecord(r Record) Record {
	c := Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, Header{Key: h.Key, Value: bytes.Clone(h.Value)})
	}
	return c
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

// sealFrame frames payload with its length and a matching CRC: bytes that
// pass the CRC check whatever they say inside.
func sealFrame(payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, payload...)
	binary.LittleEndian.PutUint32(b[4:], frameCRC(b[0:4], b[frameHeaderSize:]))
	return b
}

// headersPayload is a v2 payload: key length with the headers flag, the
// headers block's declared length, then key, block and value.
func headersPayload(key string, blockLen uint32, block []byte, value string) []byte {
	p := binary.LittleEndian.AppendUint32(nil, uint32(len(key))|headersFlag)
	p = binary.LittleEndian.AppendUint32(p, blockLen)
	p = append(p, key...)
	p = append(p, block...)
	return append(p, value...)
}

// TestCorruptHeadersAreDamage: frames whose CRC matches but whose headers
// do not fit (a huge or empty block, an entry running past it, more
// entries than MaxHeaders, a block past the payload) are damage: the
// readers refuse them without panicking or allocating by what they
// claim, and Open moves each aside while keeping the frames around it.
func TestCorruptHeadersAreDamage(t *testing.T) {
	t.Parallel()
	entry := func(nl, vl uint16, body string) []byte {
		b := binary.LittleEndian.AppendUint16(nil, nl)
		b = binary.LittleEndian.AppendUint16(b, vl)
		return append(b, body...)
	}
	tooMany := bytes.Repeat(entry(0, 0, ""), MaxHeaders+1)
	for name, payload := range map[string][]byte{
		"huge block":         headersPayload("k", 0xffffffff, entry(1, 1, "ab"), "v"),
		"empty block":        headersPayload("k", 0, nil, "v"),
		"entry past block":   headersPayload("k", 6, entry(1, 200, "ab"), "v"),
		"block over bound":   headersPayload("k", MaxHeaderBytes+4, entry(MaxHeaderBytes, 0, strings.Repeat("x", MaxHeaderBytes)), ""),
		"too many entries":   headersPayload("k", uint32(len(tooMany)), tooMany, "v"),
		"block past payload": headersPayload("k", 64, entry(1, 1, "ab"), "v"),
		"key past payload":   headersPayload(strings.Repeat("k", 3), 6, entry(1, 1, "ab"), "")[:10],
		"truncated entry":    headersPayload("k", 3, []byte{1, 0, 0}, "v"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bad := sealFrame(payload)
			_, ok := frameAt(bad, 0)
			require.False(t, ok)
			seg := append([]byte(segmentMagic), bad...)
			_, err := newFrameReader(nil, bytes.NewReader(seg), headerSize, int64(len(seg))).next()
			require.ErrorIs(t, err, ErrCorrupt)

			good := []Record{
				{Key: []byte("a"), Value: []byte("1"), Headers: []Header{{Key: "traceparent", Value: []byte("00-x")}}},
				{Key: []byte("b"), Value: []byte("2")},
			}
			data := appendFrame([]byte(segmentMagic), good[0])
			data = append(data, bad...)
			data = appendFrame(data, good[1])
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(segmentPath(dir, 1), data, 0o600))
			s, err := Open(Config{Dir: dir})
			require.NoError(t, err)
			defer s.Close()
			require.Equal(t, int64(len(bad)), s.Recovery().DiscardedBytes)
			var got []Record
			_, err = s.Drain(t.Context(), func(b []Record) error { got = append(got, b...); return nil })
			require.NoError(t, err)
			require.Equal(t, good, got)
		})
	}
}
