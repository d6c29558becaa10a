package persister

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/receipt"
)

// BenchmarkWindowFold measures the poller's share of a window: decoding
// 50,000 cursor records into the window's parts and sorting them.
func BenchmarkWindowFold(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	recs := make([]*kgo.Record, 50_000)
	for i := range recs {
		seq := 1 + r.Int64N(1000)
		rec, err := event.Encode(receipt.State{
			Key:  receipt.Key{User: "u" + strconv.Itoa(r.IntN(20_000)), Channel: "c" + strconv.Itoa(r.IntN(20))},
			Read: receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}, DeviceID: "d", UpdatedAtUnixMs: 1,
		})
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = rec
	}
	b.ReportAllocs()
	for b.Loop() {
		w := newWindow(4096, kinds.All(), &kind.Env{MentionCap: 10})
		w.add(recs)
		w.sort()
	}
}
