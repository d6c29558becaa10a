package spool

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// On-disk format. Changing any of these needs a new segmentMagic.
//
// Version 2 (segmentMagic) adds record headers: a frame whose key-length
// word has headersFlag set holds a headers block after the key. New
// segments are written as v2 and a record without headers is still written
// as a v1 frame; segments of v1 (segmentMagicV1) are read as they are.
const (
	segmentMagic      = "spool\x00v2"
	segmentMagicV1    = "spool\x00v1"
	headerSize        = int64(len(segmentMagic))
	frameHeaderSize   = 8 // length u32, crc32c u32
	payloadHeaderSize = 4 // key length u32 (| headersFlag)

	// FrameOverhead is what a record without headers costs on disk beyond
	// its key and value (FrameSize: with them).
	FrameOverhead = frameHeaderSize + payloadHeaderSize

	// maxRecordBytesLimit caps Config.MaxRecordBytes. The reader enforces it
	// rather than the configured bound, so records written under a larger
	// setting stay readable after the setting is lowered.
	maxRecordBytesLimit = 64 << 20

	// headersFlag marks a v2 frame with headers: after the key-length word
	// come the headers block's length (u32), the key, the block, the value.
	// The block is entries of [name length u16][value length u16][name]
	// [value]. A key never reaches 2 GiB, so no v1 frame has the bit set.
	headersFlag       = 1 << 31
	headersLengthSize = 4
	headerEntryHeader = HeaderOverhead
	maxPayloadBytes   = payloadHeaderSize + headersLengthSize + maxRecordBytesLimit + MaxHeaderBytes
)

// Bounds of a record's headers, checked by Append (ErrTooLarge) and by the
// reader (a frame past them is damage, so they are part of the format:
// lowering them needs a new segmentMagic). W3C trace context needs well
// under a KiB.
const (
	// MaxHeaders bounds the number of a record's headers.
	MaxHeaders = 32
	// MaxHeaderBytes bounds a record's encoded headers: the names and
	// values plus HeaderOverhead each.
	MaxHeaderBytes = 4 << 10
	// HeaderOverhead is what a header costs beyond its name and value.
	HeaderOverhead = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is one record header (a Kafka record header: the trace context,
// for one). The spool never interprets it.
type Header struct {
	Key   string
	Value []byte
}

// Record is one opaque entry. The spool never interprets Key, Value or
// Headers.
type Record struct {
	Key     []byte
	Value   []byte
	Headers []Header
}

// recordBytes is what MaxRecordBytes and ReadBatchBytes bound: the key and
// the value (headers are bounded on their own, MaxHeaderBytes).
func recordBytes(r Record) int { return len(r.Key) + len(r.Value) }

// headersBytes is the size of r's encoded headers block.
func headersBytes(hs []Header) int {
	n := 0
	for _, h := range hs {
		n += headerEntryHeader + len(h.Key) + len(h.Value)
	}
	return n
}

// FrameSize is what r costs on disk, headers included.
func FrameSize(r Record) int {
	n := FrameOverhead + recordBytes(r)
	if len(r.Headers) > 0 {
		n += headersLengthSize + headersBytes(r.Headers)
	}
	return n
}

// checkHeaders reports headers over the bounds.
func checkHeaders(hs []Header) error {
	if len(hs) > MaxHeaders {
		return fmt.Errorf("%d headers (max %d): %w", len(hs), MaxHeaders, ErrTooLarge)
	}
	if n := headersBytes(hs); n > MaxHeaderBytes {
		return fmt.Errorf("headers of %d bytes (max %d): %w", n, MaxHeaderBytes, ErrTooLarge)
	}
	return nil
}

// appendFrame appends r's frame to dst: v1's layout without headers, v2's
// with them. r's headers are within bounds (checkHeaders).
func appendFrame(dst []byte, r Record) []byte {
	start := len(dst)
	n := FrameSize(r) - frameHeaderSize
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // CRC, filled below
	if len(r.Headers) == 0 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Key)))
		dst = append(dst, r.Key...)
	} else {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Key))|headersFlag)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(headersBytes(r.Headers)))
		dst = append(dst, r.Key...)
		for _, h := range r.Headers {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(h.Key)))
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(h.Value)))
			dst = append(dst, h.Key...)
			dst = append(dst, h.Value...)
		}
	}
	dst = append(dst, r.Value...)
	binary.LittleEndian.PutUint32(dst[start+4:], frameCRC(dst[start:start+4], dst[start+frameHeaderSize:]))
	return dst
}

// decodePayload splits a frame's payload p (its CRC checked) into its
// record; ok is false when the lengths inside do not fit together or
// exceed the bounds (bytes no writer produced). With build false it only
// checks, allocating nothing. The record's slices alias p.
func decodePayload(p []byte, build bool) (rec Record, ok bool) {
	n := int64(len(p))
	word := binary.LittleEndian.Uint32(p[0:4])
	kl := int64(word &^ headersFlag)
	if word&headersFlag == 0 {
		if kl > n-payloadHeaderSize {
			return Record{}, false
		}
		k := payloadHeaderSize + kl
		// Cap the key so appending to it can never overwrite the value.
		return Record{Key: p[payloadHeaderSize:k:k], Value: p[k:]}, true
	}
	const fixed = payloadHeaderSize + headersLengthSize
	if n < fixed {
		return Record{}, false
	}
	hl := int64(binary.LittleEndian.Uint32(p[4:8]))
	if hl == 0 || hl > MaxHeaderBytes || kl > n-fixed || hl > n-fixed-kl {
		return Record{}, false
	}
	k, h := fixed+kl, fixed+kl+hl
	block := p[k:h]
	var hs []Header
	for count := 0; len(block) > 0; count++ {
		if count == MaxHeaders || len(block) < headerEntryHeader {
			return Record{}, false
		}
		nl, vl := int(binary.LittleEndian.Uint16(block[0:2])), int(binary.LittleEndian.Uint16(block[2:4]))
		if nl+vl > len(block)-headerEntryHeader {
			return Record{}, false
		}
		if build {
			v := headerEntryHeader + nl
			hs = append(hs, Header{Key: string(block[headerEntryHeader:v]), Value: block[v : v+vl : v+vl]})
		}
		block = block[headerEntryHeader+nl+vl:]
	}
	return Record{Key: p[fixed:k:k], Value: p[h:], Headers: hs}, true
}

// knownMagic reports whether hdr is the header of a segment of a version
// this reader knows.
func knownMagic(hdr []byte) bool {
	return bytes.Equal(hdr, []byte(segmentMagic)) || bytes.Equal(hdr, []byte(segmentMagicV1))
}

// frameCRC covers the length too, so a damaged length cannot make a shorter
// or longer slice of bytes pass as a frame.
func frameCRC(length, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, length), castagnoli, payload)
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
}

// frameReader decodes the frames of one segment between off and end.
type frameReader struct {
	br  *bufio.Reader
	off int64 // start of the next frame
	end int64 // how far the segment may be read (its durable size)
	hdr [frameHeaderSize]byte
	// scratch, when non-nil, is reused for every payload: records returned
	// by next are then valid only until the following call (recovery scans).
	scratch []byte
}

func newFrameReader(br *bufio.Reader, r io.ReaderAt, off, end int64) *frameReader {
	sr := io.NewSectionReader(r, off, end-off)
	if br == nil {
		br = bufio.NewReaderSize(sr, 64<<10)
	} else {
		br.Reset(sr)
	}
	return &frameReader{br: br, off: off, end: end}
}

// next decodes the frame at fr.off and advances past it. It returns io.EOF
// exactly at end, an error wrapping ErrCorrupt when the bytes there are not
// one whole frame with a matching CRC (fr.off then stays at its start), and
// any other error as an I/O failure.
func (fr *frameReader) next() (Record, error) {
	remain := fr.end - fr.off
	if remain == 0 {
		return Record{}, io.EOF
	}
	if remain < frameHeaderSize {
		return Record{}, corruptf("%d bytes at offset %d, shorter than a frame header", remain, fr.off)
	}
	if _, err := io.ReadFull(fr.br, fr.hdr[:]); err != nil {
		return Record{}, readError(err, fr.off)
	}
	n := int64(binary.LittleEndian.Uint32(fr.hdr[0:4]))
	if n < payloadHeaderSize || n > maxPayloadBytes {
		return Record{}, corruptf("frame length %d at offset %d out of range", n, fr.off)
	}
	if n > remain-frameHeaderSize {
		return Record{}, corruptf("frame of %d bytes at offset %d runs past the end (%d)", n, fr.off, fr.end)
	}
	var p []byte
	if fr.scratch != nil {
		if int64(cap(fr.scratch)) < n {
			fr.scratch = make([]byte, n)
		}
		p = fr.scratch[:n]
	} else {
		p = make([]byte, n)
	}
	if _, err := io.ReadFull(fr.br, p); err != nil {
		return Record{}, readError(err, fr.off)
	}
	if got, want := frameCRC(fr.hdr[0:4], p), binary.LittleEndian.Uint32(fr.hdr[4:8]); got != want {
		return Record{}, corruptf("frame at offset %d: crc %08x, want %08x", fr.off, got, want)
	}
	rec, ok := decodePayload(p, true)
	if !ok {
		return Record{}, corruptf("frame at offset %d: its key and header lengths do not fit its payload of %d bytes", fr.off, n)
	}
	fr.off += frameHeaderSize + n
	return rec, nil
}

// readError maps a short read inside [off, end) to ErrCorrupt: the file is
// shorter than the size we were told, which is a torn file, not a failing
// disk.
func readError(err error, off int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptf("short read at offset %d", off)
	}
	return fmt.Errorf("reading frame at offset %d: %w", off, err)
}

// scanSegment checks the header of the segment in r (size bytes) and visits
// every whole, CRC-valid frame in order with its offset. It returns where the
// valid frames end: 0 when the header itself is bad, so the whole file is
// damage. A returned error wraps ErrCorrupt when scanning stopped at damage
// (validEnd < size), and is an I/O failure otherwise. Records passed to fn are
// valid only during the call.
func scanSegment(r io.ReaderAt, size int64, fn func(off int64, rec Record)) (validEnd int64, err error) {
	if size < headerSize {
		return 0, corruptf("segment of %d bytes has no whole header", size)
	}
	var hdr [headerSize]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return 0, readError(err, 0)
	}
	if !knownMagic(hdr[:]) {
		return 0, corruptf("segment header %q is neither %q nor %q", hdr[:], segmentMagic, segmentMagicV1)
	}
	fr := newFrameReader(nil, r, headerSize, size)
	fr.scratch = make([]byte, 0, 4<<10)
	for {
		off := fr.off
		rec, err := fr.next()
		if errors.Is(err, io.EOF) {
			return fr.off, nil
		}
		if err != nil {
			return fr.off, err
		}
		if fn != nil {
			fn(off, rec)
		}
	}
}

// span is a byte range [off, end) of a segment.
type span struct{ off, end int64 }

// frameAt reports whether a whole, CRC-valid frame starts at off in data,
// and its length.
func frameAt(data []byte, off int64) (int64, bool) {
	remain := int64(len(data)) - off
	if remain < frameHeaderSize+payloadHeaderSize {
		return 0, false
	}
	n := int64(binary.LittleEndian.Uint32(data[off : off+4]))
	if n < payloadHeaderSize || n > maxPayloadBytes || n > remain-frameHeaderSize {
		return 0, false
	}
	p := data[off+frameHeaderSize : off+frameHeaderSize+n]
	if frameCRC(data[off:off+4], p) != binary.LittleEndian.Uint32(data[off+4:off+8]) {
		return 0, false
	}
	if _, ok := decodePayload(p, false); !ok {
		return 0, false
	}
	return frameHeaderSize + n, true
}

// scanResync finds every whole, CRC-valid frame of a segment's bytes and
// the damaged ranges between them: after a damaged frame (or header) the
// scan resynchronises at the next offset where a valid frame starts (its
// length in range and its CRC, which covers the length, matching), so one
// bad frame costs its own bytes, not the rest of the segment.
func scanResync(data []byte) (frames, damage []span) {
	size := int64(len(data))
	if size < headerSize {
		return nil, []span{{0, size}}
	}
	if !knownMagic(data[:headerSize]) {
		damage = append(damage, span{0, headerSize})
	}
	off := headerSize
	for off < size {
		if n, ok := frameAt(data, off); ok {
			frames = append(frames, span{off, off + n})
			off += n
			continue
		}
		d := span{off: off}
		for off++; off < size; off++ {
			if _, ok := frameAt(data, off); ok {
				break
			}
		}
		d.end = off
		damage = append(damage, d)
	}
	return frames, damage
}
