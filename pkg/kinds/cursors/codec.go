package cursors

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
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

func appendPos(b []byte, p receipt.Position) []byte {
	if p.Epoch != 0 {
		b = redisstore.AppendB62(b, p.Epoch)
		b = append(b, '.')
	}
	return redisstore.AppendB62(b, p.Seq)
}

func parsePos(s string) (receipt.Position, error) {
	var p receipt.Position
	var err error
	if e, seq, ok := strings.Cut(s, "."); ok {
		if p.Epoch, err = redisstore.ParseB62(e); err != nil {
			return p, err
		}
		s = seq
	}
	p.Seq, err = redisstore.ParseB62(s)
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
		return redisstore.AppendB62(b, p.Seq)
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
	b = redisstore.AppendB62(b, st.UpdatedAtUnixMs)
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
	n := redisstore.SplitSpaces(v, f[:])
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
	if st.UpdatedAtUnixMs, err = redisstore.ParseB62(f[3]); err != nil {
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

// Storable refuses cursors the compact layout cannot hold.
func Storable(st receipt.State) error { return storable(st, false) }

// AppendValue appends the compact layout of st as it is, for a kind whose
// value holds cursors (a thread's).
func AppendValue(b []byte, st receipt.State) []byte { return appendValue(b, st) }

// DecodeValue inverts AppendValue (and reads the v1 layout).
func DecodeValue(k receipt.Key, v string) (receipt.State, error) { return decodeValue(k, v) }
