package event_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
)

// typicalMark is what the gateway produces for a read: the read and the
// delivered cursor it implies, a device, a time, the stamped generation
// (the hot path, EncodeReceipts).
func typicalMark() *kgo.Record {
	c := receipt.Cursor{Position: receipt.Position{Seq: 1042}, MessageID: "m1042"}
	s := receipt.State{Key: receipt.Key{User: "u12345", Channel: "c678"}, Read: c, Delivered: c,
		DeviceID: "ios", UpdatedAtUnixMs: 1_764_000_000_000}
	return event.EncodeReceipts([]receipt.State{s}, []int64{0}, event.TopicDefault)[0]
}

// benchDecode times the persister's decode of one record (DecodeRecord,
// every bound checked) and reports the record's value size.
func benchDecode(b *testing.B, r *kgo.Record) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := event.DecodeRecord(r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(r.Value)), "value-bytes")
}

func BenchmarkDecodeMark(b *testing.B) { benchDecode(b, typicalMark()) }

func BenchmarkDecodeJoin(b *testing.B) {
	k := receipt.Key{User: "u12345", Channel: "c678"}
	st := receipt.State{Key: k, PrivateRead: receipt.Cursor{Position: receipt.Position{Epoch: 1, Seq: 1042}}, UpdatedAtUnixMs: 1_764_000_000_000}
	r, err := event.EncodeMembership(channel.Membership{Key: k, Member: true, VersionSeq: 1042, VersionUnixMs: 1_764_000_000_000, JoinSeq: 1042}, &st)
	if err != nil {
		b.Fatal(err)
	}
	event.StampGeneration(r, 0)
	benchDecode(b, r)
}

func BenchmarkDecodeHead(b *testing.B) {
	r, err := event.EncodeHeadWithGroupMentions(channel.Head{Channel: "c678", Seq: 1043, MessageID: "m1043", UpdatedAtUnixMs: 1_764_000_000_000},
		[]channel.GroupMention{{Seq: 1043, Sender: "u12345"}})
	if err != nil {
		b.Fatal(err)
	}
	benchDecode(b, r)
}

// BenchmarkEncodeMarks times the gateway's hot-path encode of a batch of
// 64 marks.
func BenchmarkEncodeMarks(b *testing.B) {
	c := receipt.Cursor{Position: receipt.Position{Seq: 1042}, MessageID: "m1042"}
	states := make([]receipt.State, 64)
	gens := make([]int64, 64)
	for i := range states {
		states[i] = receipt.State{Key: receipt.Key{User: "u12345", Channel: "c678"}, Read: c, Delivered: c, DeviceID: "ios", UpdatedAtUnixMs: 1_764_000_000_000}
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = event.EncodeReceipts(states, gens, event.TopicDefault)
	}
}
