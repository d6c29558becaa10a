package redisstore

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/readstate/receipts/pkg/channel"
)

// Numbers in the layouts are base 62 with the digits 0-9A-Za-z (ASCII
// order) and no leading zeros, so that they compare exactly as strings
// (longer is greater, then byte by byte), int64 included, without Lua's
// doubles (pkg/kinds/cursors has the cursors' value).
const digits62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// appendB62 appends n ≥ 0 in base 62.
func appendB62(b []byte, n int64) []byte {
	if n == 0 {
		return append(b, '0')
	}
	var buf [11]byte // 62^11 > 2^63
	i := len(buf)
	for u := uint64(n); u > 0; u /= 62 {
		i--
		buf[i] = digits62[u%62]
	}
	return append(b, buf[i:]...)
}

var errBase62 = errors.New("not a base-62 int64")

// parseB62 inverts appendB62.
func parseB62(s string) (int64, error) {
	if s == "" || len(s) > 11 {
		return 0, errBase62
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'A' <= c && c <= 'Z':
			d = uint64(c-'A') + 10
		case 'a' <= c && c <= 'z':
			d = uint64(c-'a') + 36
		default:
			return 0, errBase62
		}
		if n > (math.MaxInt64-d)/62 {
			return 0, errBase62
		}
		n = n*62 + d
	}
	return int64(n), nil
}

// splitSpaces puts the space-separated fields of v into f (those beyond
// len(f) are dropped) and returns how many v has, without allocating.
func splitSpaces(v string, f []string) int {
	n := 0
	for rest := v; ; n++ {
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			if n < len(f) {
				f[n] = rest
			}
			return n + 1
		}
		if n < len(f) {
			f[n] = rest[:i]
		}
		rest = rest[i+1:]
	}
}

// Padded seqs and heads: the channel value's parts (pkg/kinds/heads) and
// a thread head's value (pkg/kinds/threads) are written in these forms.

func padSeq(seq int64) string {
	var buf [seqWidth]byte
	return string(appendPadded(buf[:0], seq))
}

// appendPadded appends padSeq(seq) to b without allocating for it.
func appendPadded(b []byte, seq int64) []byte {
	var digits [seqWidth]byte
	d := appendB62(digits[:0], seq)
	for range seqWidth - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

func parsePadded(s string) (int64, error) {
	t := strings.TrimLeft(s, "0")
	if t == "" {
		t = "0"
	}
	return parseB62(t)
}

func encodeHead(h channel.Head) (string, error) {
	if h.Seq < 0 || h.UpdatedAtUnixMs < 0 || strings.IndexByte(h.MessageID, ' ') >= 0 {
		return "", fmt.Errorf("storing the head of %s in redis: not storable: %+v", h.Channel, h)
	}
	return string(appendB62(nil, h.Seq)) + " " + h.MessageID + " " + string(appendB62(nil, h.UpdatedAtUnixMs)), nil
}

func decodeHead(ch, v string) (channel.Head, error) {
	seq, msg, at, ok := parseHead(v)
	if !ok {
		return channel.Head{}, fmt.Errorf("decoding the redis head of %s: unexpected %q", ch, v)
	}
	return channel.Head{Channel: ch, Seq: seq, MessageID: msg, UpdatedAtUnixMs: at}, nil
}

// parseHead reads a head's value (a channel's or a thread's).
func parseHead(v string) (seq int64, msg string, at int64, ok bool) {
	var f [3]string
	if splitSpaces(v, f[:]) != len(f) {
		return 0, "", 0, false
	}
	seq, err1 := parseB62(f[0])
	at, err2 := parseB62(f[2])
	if err1 != nil || err2 != nil {
		return 0, "", 0, false
	}
	return seq, f[1], at, true
}
