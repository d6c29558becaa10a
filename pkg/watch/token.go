package watch

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
)

// ErrBadToken means a resume token is not one this package wrote (or was
// damaged): the caller's error, never retried.
var ErrBadToken = errors.New("bad resume token")

// tokenVersion is the first byte of every token.
const tokenVersion = 1

// maxTokenChannels bounds what a token may hold (and so its size: about
// 11–17 bytes a channel before base64, ~20 KiB for 1,000 channels).
const maxTokenChannels = 4096

// A resume token is, base64url without padding:
//
//	version (1 byte) | base ms (uvarint) | count (uvarint) |
//	count × [ channel hash (8 bytes, FNV-1a 64) | ms − base (uvarint) | seq (uvarint) ] |
//	CRC-32C of everything before (4 bytes)
//
// Channels are named by hash, not by id, to keep the token compact; a
// collision among the channels of one stream has odds of about n²/2⁶⁵. The
// checksum turns a damaged or made-up token into ErrBadToken instead of a
// resume from the wrong place.
type token map[uint64]streamID

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func channelHash(ch string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(ch))
	return h.Sum64()
}

// encodeToken writes the ids of channels (the cursor map of a subscriber).
func encodeToken(cursor map[string]streamID) string {
	base := ^uint64(0)
	for _, id := range cursor {
		base = min(base, id.ms)
	}
	if len(cursor) == 0 {
		base = 0
	}
	b := make([]byte, 0, 16+len(cursor)*16)
	b = append(b, tokenVersion)
	b = binary.AppendUvarint(b, base)
	b = binary.AppendUvarint(b, uint64(len(cursor)))
	for ch, id := range cursor {
		b = binary.BigEndian.AppendUint64(b, channelHash(ch))
		b = binary.AppendUvarint(b, id.ms-base)
		b = binary.AppendUvarint(b, id.seq)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken reads a token; "" is the empty token (a fresh stream).
func decodeToken(s string) (token, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > base64.RawURLEncoding.EncodedLen(16+maxTokenChannels*28) {
		return nil, fmt.Errorf("%w: longer than any token", ErrBadToken)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrBadToken)
	}
	if len(b) < 1+4 {
		return nil, fmt.Errorf("%w: too short", ErrBadToken)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrBadToken)
	}
	if body[0] != tokenVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrBadToken, body[0])
	}
	r := body[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	base, ok1 := next()
	count, ok2 := next()
	if !ok1 || !ok2 || count > maxTokenChannels {
		return nil, fmt.Errorf("%w: bad header", ErrBadToken)
	}
	t := make(token, count)
	for range count {
		if len(r) < 8 {
			return nil, fmt.Errorf("%w: truncated", ErrBadToken)
		}
		h := binary.BigEndian.Uint64(r)
		r = r[8:]
		ms, ok1 := next()
		seq, ok2 := next()
		if !ok1 || !ok2 || ms > ^uint64(0)-base {
			return nil, fmt.Errorf("%w: truncated", ErrBadToken)
		}
		t[h] = streamID{base + ms, seq}
	}
	if len(r) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", ErrBadToken)
	}
	return t, nil
}

// lookup returns the token's id of channel ch.
func (t token) lookup(ch string) (streamID, bool) {
	id, ok := t[channelHash(ch)]
	return id, ok
}
