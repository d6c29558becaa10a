package event

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/readstate/receipts/pkg/receipt"
)

// The gateway's hot path encodes each mark's record straight into bytes,
// without the protobuf message tree (a ReceiptEvent, three Cursors and
// their Positions per mark) that Encode builds and proto.Marshal walks:
// the bytes are the same (TestAppendReceiptMatchesEncode), field by field
// in field-number order as proto.Marshal writes them.

// AppendReceipt appends the record value Encode(s) carries, stamped with
// the erasure generation gen as StampGeneration stamps it (Unstamped: none).
func AppendReceipt(b []byte, s receipt.State, gen int64) []byte {
	b = appendEnvelope(b, RecordEnvelope{User: s.Key.User, Channel: s.Key.Channel, AcceptedAtUnixMs: s.UpdatedAtUnixMs})
	if hasCursor(s) {
		n := cursorsSize(s)
		b = protowire.AppendTag(b, envPayloadField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(2+1+protowire.SizeBytes(n)))
		b = protowire.AppendTag(b, payloadTypeField, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(ptCursors))
		b = protowire.AppendTag(b, payloadBytesField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		b = appendCursors(b, s)
	}
	if gen >= 0 {
		b = appendStamp(b, envGenerationField, envStampedField, gen)
	}
	return b
}

// AppendKafkaKey appends a user event's record key, k.KafkaKey().
func AppendKafkaKey(b []byte, k receipt.Key) []byte { return k.AppendKafkaKey(b) }

// EncodeReceipts builds the records of states (gens[i] stamped on the
// i-th), their keys and values in one buffer: one allocation for a whole
// batch's bytes and one for its records.
func EncodeReceipts(states []receipt.State, gens []int64, topic string) []*kgo.Record {
	size := 0
	for _, s := range states {
		size += s.Key.KafkaKeyLen() + receiptSizeBound(s)
	}
	buf := make([]byte, 0, size)
	recs := make([]kgo.Record, len(states))
	out := make([]*kgo.Record, len(states))
	for i, s := range states {
		start := len(buf)
		buf = AppendKafkaKey(buf, s.Key)
		mid := len(buf)
		buf = AppendReceipt(buf, s, gens[i])
		recs[i] = kgo.Record{Topic: topic, Key: buf[start:mid:mid], Value: buf[mid:len(buf):len(buf)], Headers: recordHeaders}
		out[i] = &recs[i]
	}
	return out
}

// receiptSizeBound bounds AppendReceipt's output for s (every varint at
// its longest), so a batch's buffer never grows.
func receiptSizeBound(s receipt.State) int {
	const tagged = 1 + binary.MaxVarintLen64
	n := 4 + 8*tagged // schema version, time, generation, stamped, payload type, lengths
	n += len(s.Key.User) + len(s.Key.Channel) + len(s.DeviceID)
	for _, c := range []receipt.Cursor{s.Read, s.Delivered, s.PrivateRead} {
		n += 3*tagged + 4 + len(c.MessageID)
	}
	return n
}

func appendString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendInt(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// appendCursor appends a Cursor message field: its Position (always
// present, as CursorToProto sets it) and message id.
func appendCursor(b []byte, num protowire.Number, c receipt.Cursor) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(cursorSize(c)))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(positionSize(c.Position)))
	b = appendInt(b, 1, c.Position.Epoch)
	b = appendInt(b, 2, c.Position.Seq)
	return appendString(b, 2, c.MessageID)
}

// positionSize is the size of a Position message.
func positionSize(p receipt.Position) int {
	n := 0
	if p.Epoch != 0 {
		n += 1 + protowire.SizeVarint(uint64(p.Epoch))
	}
	if p.Seq != 0 {
		n += 1 + protowire.SizeVarint(uint64(p.Seq))
	}
	return n
}

// cursorSize is the size of a Cursor message.
func cursorSize(c receipt.Cursor) int {
	n := 1 + protowire.SizeBytes(positionSize(c.Position))
	if c.MessageID != "" {
		n += 1 + protowire.SizeBytes(len(c.MessageID))
	}
	return n
}
