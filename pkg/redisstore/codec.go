package redisstore

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// The stored value of one (user, channel), the hash field being the channel
// id. Two layouts are read; only the compact one is written.
//
// Compact: fields separated by one space,
//
//	READ SP READ_MSG SP DEVICE SP UPDATED_MS [SP DELIVERED SP DELIVERED_MSG] [SP PRIVATE_READ]
//
// where READ and DELIVERED are positions, [EPOCH "."] SEQ with EPOCH omitted
// when 0; every number (EPOCH, SEQ, UPDATED_MS) is base 62 with the digits
// 0-9A-Za-z (ASCII order) and no leading zeros, so that numbers compare
// exactly as strings (longer is greater, then byte by byte), int64 included,
// without Lua's doubles; the delivered pair is omitted when it equals the
// read cursor (position and message id), the common case since reading
// implies delivery; PRIVATE_READ is a position, without message id, present
// only while the private read is ahead of the read cursor (4 or 6 fields
// without it, as the previous build wrote them; 5 or 7 with it); ids are
// stored as they are, possibly empty, and never
// contain a space (receipt.ValidateID rejects whitespace; Merge and Hydrate
// refuse them). It needs no version tag: its first field, a position, never
// contains ':' (ids may), and every v1 value starts with "v1:".
//
// For example "2ZI m9876 d1 VbmAx6e" is read = delivered = seq 9876 with
// message id "m9876", device d1, updated at 1,795,416,092,504 ms, and
// "1.G m16 d0 VbmAx6e 1.I m18" is epoch 1 seq 16 read, delivered up to
// seq 18. The empty value is never stored; Merge's script answers it for "no
// state".
//
// v1, the previous layout, still read and merged, and rewritten compactly
// the next time its cursors advance: "v1:re:rs:rm:de:ds:dm:dev:ts", numbers
// in decimal.
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

func appendPos(b []byte, p receipt.Position) []byte {
	if p.Epoch != 0 {
		b = appendB62(b, p.Epoch)
		b = append(b, '.')
	}
	return appendB62(b, p.Seq)
}

func parsePos(s string) (receipt.Position, error) {
	var p receipt.Position
	var err error
	if e, seq, ok := strings.Cut(s, "."); ok {
		if p.Epoch, err = parseB62(e); err != nil {
			return p, err
		}
		s = seq
	}
	p.Seq, err = parseB62(s)
	return p, err
}

// encodeValue is the compact value of what merging st into an empty field
// stores (receipt.Merge into the zero state: delivered raised to the read
// seq, a private read not ahead of the read dropped, a cursor without a
// position dropped with its id), and "" (nothing to store) when no cursor
// has a position. The private read is stored without its message id. It
// refuses what the layout cannot hold: negative numbers (EpochCurrent
// included: see encodeMark) and ids with a space.
func encodeValue(st receipt.State) (string, error) {
	if err := storable(st, false); err != nil {
		return "", err
	}
	merged, moved := receipt.Merge(receipt.State{Key: st.Key}, st)
	if !moved {
		return "", nil
	}
	merged.PrivateRead.MessageID = ""
	return string(appendValue(nil, merged)), nil
}

// encodeMark is the value of an incoming mark as the merge script reads
// it, as it is: the read and private read epochs may be
// receipt.EpochCurrent, written "-", which the script resolves to the
// stored read epoch.
func encodeMark(st receipt.State) (string, error) {
	if err := storable(st, true); err != nil {
		return "", err
	}
	if st.Read.Position.IsZero() && st.Delivered.Position.IsZero() && st.PrivateRead.Position.IsZero() {
		return "", nil
	}
	return string(appendValue(nil, st)), nil
}

// storable refuses what the layout cannot hold; marks may carry
// EpochCurrent in their read and private read epochs.
func storable(st receipt.State, mark bool) error {
	minEpoch := int64(0)
	if mark {
		minEpoch = receipt.EpochCurrent
	}
	for _, n := range []int64{st.Read.Position.Seq, st.PrivateRead.Position.Seq, st.Delivered.Position.Epoch, st.Delivered.Position.Seq, st.UpdatedAtUnixMs} {
		if n < 0 {
			return fmt.Errorf("storing %s in redis: negative position or time in %+v", st.Key.KafkaKey(), st)
		}
	}
	if st.Read.Position.Epoch < minEpoch || st.PrivateRead.Position.Epoch < minEpoch {
		return fmt.Errorf("storing %s in redis: negative epoch in %+v", st.Key.KafkaKey(), st)
	}
	for _, id := range []string{st.Read.MessageID, st.Delivered.MessageID, st.DeviceID} {
		if strings.IndexByte(id, ' ') >= 0 {
			return fmt.Errorf("storing %s in redis: id %q contains a space", st.Key.KafkaKey(), id)
		}
	}
	return nil
}

func appendMarkPos(b []byte, p receipt.Position) []byte {
	if p.Epoch == receipt.EpochCurrent {
		b = append(b, '-', '.')
		return appendB62(b, p.Seq)
	}
	return appendPos(b, p)
}

// appendValue appends the compact layout of st as it is.
func appendValue(b []byte, st receipt.State) []byte {
	b = appendMarkPos(b, st.Read.Position)
	b = append(b, ' ')
	b = append(b, st.Read.MessageID...)
	b = append(b, ' ')
	b = append(b, st.DeviceID...)
	b = append(b, ' ')
	b = appendB62(b, st.UpdatedAtUnixMs)
	if st.Delivered != st.Read {
		b = append(b, ' ')
		b = appendPos(b, st.Delivered.Position)
		b = append(b, ' ')
		b = append(b, st.Delivered.MessageID...)
	}
	if !st.PrivateRead.Position.IsZero() {
		b = append(b, ' ')
		b = appendMarkPos(b, st.PrivateRead.Position)
	}
	return b
}

// decodeValue decodes a stored value of either layout ("" is no state).
func decodeValue(k receipt.Key, v string) (receipt.State, error) {
	switch {
	case v == "":
		return receipt.State{Key: k}, nil
	case strings.HasPrefix(v, "v1:"):
		return decodeV1(k, v)
	}
	var f [7]string
	n := splitSpaces(v, f[:])
	bad := func(err error) (receipt.State, error) {
		return receipt.State{}, fmt.Errorf("decoding redis value for %s: unexpected %q: %w", k.KafkaKey(), v, err)
	}
	if n < 4 || n > 7 {
		return bad(fmt.Errorf("%d fields, want 4 to 7", n))
	}
	st := receipt.State{Key: k, DeviceID: f[2]}
	var err error
	if st.Read.Position, err = parsePos(f[0]); err != nil {
		return bad(err)
	}
	st.Read.MessageID = f[1]
	if st.UpdatedAtUnixMs, err = parseB62(f[3]); err != nil {
		return bad(err)
	}
	st.Delivered = st.Read
	if n >= 6 {
		if st.Delivered.Position, err = parsePos(f[4]); err != nil {
			return bad(err)
		}
		st.Delivered.MessageID = f[5]
	}
	if n == 5 || n == 7 {
		if st.PrivateRead.Position, err = parsePos(f[n-1]); err != nil {
			return bad(err)
		}
	}
	return st, nil
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

// decodeV1 decodes "v1:re:rs:rm:de:ds:dm:dev:ts".
func decodeV1(k receipt.Key, v string) (receipt.State, error) {
	p := strings.Split(v, ":")
	if len(p) != 9 || p[0] != "v1" {
		return receipt.State{}, fmt.Errorf("decoding redis value for %s: unexpected %q", k.KafkaKey(), v)
	}
	nums := make([]int64, 0, 5)
	for _, i := range []int{1, 2, 4, 5, 8} {
		n, err := strconv.ParseInt(p[i], 10, 64)
		if err != nil {
			return receipt.State{}, fmt.Errorf("decoding redis value for %s: %w", k.KafkaKey(), err)
		}
		nums = append(nums, n)
	}
	return receipt.State{
		Key:             k,
		Read:            receipt.Cursor{Position: receipt.Position{Epoch: nums[0], Seq: nums[1]}, MessageID: p[3]},
		Delivered:       receipt.Cursor{Position: receipt.Position{Epoch: nums[2], Seq: nums[3]}, MessageID: p[6]},
		DeviceID:        p[7],
		UpdatedAtUnixMs: nums[4],
	}, nil
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
