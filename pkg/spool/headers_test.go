package spool_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/spool"
)

// traced is rec(i) with a W3C trace context, as kafkagate's records carry
// it (tracestate on every other one).
func traced(i int) spool.Record {
	r := rec(i)
	r.Headers = []spool.Header{{Key: "traceparent", Value: fmt.Appendf(nil, "00-%032x-%016x-01", i+1, i+1)}}
	if i%2 == 0 {
		r.Headers = append(r.Headers, spool.Header{Key: "tracestate", Value: []byte("vendor=opaque")})
	}
	return r
}

// TestHeadersSurviveTheSpool: records with headers come out of the spool
// with them, in order among records without, whether drained by the same
// spool or after a reopen (recovery scans every frame); a record's size on
// disk is FrameSize.
func TestHeadersSurviveTheSpool(t *testing.T) {
	t.Parallel()
	var want []spool.Record
	for i := range 40 {
		if i%3 == 0 {
			want = append(want, rec(i))
		} else {
			want = append(want, traced(i))
		}
	}
	dir := t.TempDir()
	s, err := spool.Open(spool.Config{Dir: dir, SegmentBytes: 10 * recSize})
	require.NoError(t, err)
	size := int64(0)
	for i := 0; i < len(want); i += 4 {
		require.NoError(t, s.Append(want[i:i+4]...))
		for _, r := range want[i : i+4] {
			size += int64(spool.FrameSize(r))
		}
	}
	st := s.Stats()
	require.Equal(t, size+int64(st.Segments)*headerSize, st.Bytes, "FrameSize is what a record costs")
	require.Equal(t, int64(len(rec(0).Key)+len(rec(0).Value)+spool.FrameOverhead), int64(spool.FrameSize(rec(0))))

	// Half now, the rest after a reopen.
	var got []spool.Record
	batch, commit, err := s.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, commit())
	got = append(got, batch...)
	require.NoError(t, s.Close())

	s = open(t, spool.Config{Dir: dir})
	require.Zero(t, s.Recovery().DiscardedBytes)
	got = append(got, drainAll(t, s)...)
	require.Equal(t, want, got)
	require.Equal(t, "traceparent", got[1].Headers[0].Key)
}

// TestV1SegmentStillReads: a segment written by the first format (magic
// spool\0v1, frames without headers: testdata/v1, written by the spool
// before headers existed) is recovered and drained as it is, and the
// spool appends v2 records after it.
func TestV1SegmentStillReads(t *testing.T) {
	t.Parallel()
	old, err := os.ReadFile(filepath.Join("testdata", "v1", "00000000000000000001.seg"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(old, []byte("spool\x00v1")), "the fixture is a v1 segment")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000001.seg"), old, 0o600))

	s := open(t, spool.Config{Dir: dir})
	rc := s.Recovery()
	require.Equal(t, int64(7), rc.Records)
	require.Zero(t, rc.DiscardedBytes)
	require.NoError(t, s.Append(traced(1)))
	var want []spool.Record
	for i := range 5 {
		want = append(want, spool.Record{Key: fmt.Appendf(nil, "user-%d:chan-%d", i, i*7), Value: fmt.Appendf(nil, "v1 value %d", i)})
	}
	want = append(want, spool.Record{Key: []byte{}, Value: []byte("no key")}, spool.Record{Key: []byte("no value"), Value: []byte{}}, traced(1))
	require.Equal(t, want, drainAll(t, s))
}

// TestHeaderBounds: an Append with a record over the header bounds fails
// whole with ErrTooLarge and stores nothing; at the bounds it is stored.
func TestHeaderBounds(t *testing.T) {
	t.Parallel()
	s := open(t, spool.Config{})
	many := make([]spool.Header, spool.MaxHeaders+1)
	for i := range many {
		many[i] = spool.Header{Key: fmt.Sprint("h", i), Value: []byte{}}
	}
	big := []spool.Header{{Key: "tracestate", Value: []byte(strings.Repeat("x", spool.MaxHeaderBytes))}}
	for name, hs := range map[string][]spool.Header{"too many": many, "too big": big} {
		r := rec(1)
		r.Headers = hs
		require.ErrorIs(t, s.Append(rec(0), r), spool.ErrTooLarge, name)
	}
	require.Equal(t, int64(0), s.Stats().Records, "the refused calls stored nothing")

	// MaxHeaders headers of MaxHeaderBytes in all.
	atBounds := rec(2)
	atBounds.Headers = many[:spool.MaxHeaders]
	total := 0
	for _, h := range atBounds.Headers {
		total += 4 + len(h.Key)
	}
	atBounds.Headers[0].Value = make([]byte, spool.MaxHeaderBytes-total)
	require.NoError(t, s.Append(atBounds))
	require.Equal(t, []spool.Record{atBounds}, drainAll(t, s))
}
