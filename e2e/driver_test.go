package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/receipt"
)

// workload describes the load several concurrent clients send.
type workload struct {
	clients  int
	users    int
	channels int
	batch    int
	dup      float64 // share of items that resend an earlier item
	reorder  float64 // share of items with a seq below the key's newest
	pause    time.Duration
}

// driver sends a workload until stopped and records every acknowledged item
// in the model. Only items the gateway acknowledged count: a call that
// failed (gateway killed, 503) may or may not have been applied.
type driver struct {
	w       workload
	m       *model
	api     string
	stop    chan struct{}
	wg      sync.WaitGroup
	seqs    sync.Map // receipt.Key → *atomic.Int64
	sent    atomic.Int64
	errs    atomic.Int64
	spooled atomic.Int64
}

func startDriver(api string, w workload, m *model, seed uint64) *driver {
	d := &driver{w: w, m: m, api: api, stop: make(chan struct{})}
	for i := 0; i < w.clients; i++ {
		d.wg.Add(1)
		go d.client(i, seed+uint64(i))
	}
	return d
}

func (d *driver) halt() {
	close(d.stop)
	d.wg.Wait()
}

func (d *driver) nextSeq(k receipt.Key) *atomic.Int64 {
	v, _ := d.seqs.LoadOrStore(k, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (d *driver) client(i int, seed uint64) {
	defer d.wg.Done()
	rng := rand.New(rand.NewPCG(seed, 99))
	opts := []connect.ClientOption{connect.WithGRPC()}
	if i%2 == 1 {
		opts = []connect.ClientOption{connect.WithProtoJSON()}
	}
	hc := &http.Client{Timeout: 15 * time.Second, Transport: h2cTransport()}
	if i%2 == 1 {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	cl := receiptsv1connect.NewReceiptServiceClient(hc, "http://"+d.api, opts...)
	var history []*receiptsv1.Receipt
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		req := &receiptsv1.MarkReceiptsRequest{}
		for j := 0; j < d.w.batch; j++ {
			if len(history) > 0 && rng.Float64() < d.w.dup {
				req.Receipts = append(req.Receipts, history[rng.IntN(len(history))])
				continue
			}
			k := receipt.Key{User: fmt.Sprintf("u%d", rng.IntN(d.w.users)), Channel: fmt.Sprintf("c%d", rng.IntN(d.w.channels))}
			ctr := d.nextSeq(k)
			seq := ctr.Add(1 + rng.Int64N(3))
			if rng.Float64() < d.w.reorder && seq > 5 {
				seq -= 1 + rng.Int64N(5)
			}
			kind := receiptsv1.Kind_READ
			if rng.IntN(3) == 0 {
				kind = receiptsv1.Kind_DELIVERED
			}
			r := &receiptsv1.Receipt{UserId: k.User, ChannelId: k.Channel, Kind: kind, Seq: seq,
				MessageId: fmt.Sprintf("m%d", seq), DeviceId: fmt.Sprintf("dev%d", i)}
			req.Receipts = append(req.Receipts, r)
			history = append(history, r)
			if len(history) > 256 {
				history = history[128:]
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		resp, err := cl.MarkReceipts(ctx, connect.NewRequest(req))
		cancel()
		d.sent.Add(int64(len(req.Receipts)))
		if err != nil {
			d.errs.Add(1)
			select {
			case <-d.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		for j, res := range resp.Msg.GetResults() {
			if res.GetDurability() == receiptsv1.Durability_DURABILITY_UNSPECIFIED {
				continue
			}
			if res.GetDurability() == receiptsv1.Durability_SPOOLED {
				d.spooled.Add(1)
			}
			d.m.ack(stateOf(req.Receipts[j]))
		}
		if d.w.pause > 0 {
			time.Sleep(d.w.pause)
		}
	}
}

// waitAcked polls until the model holds n acknowledged events.
func waitAcked(t testing.TB, m *model, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		got := m.n
		m.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("fewer than %d events acknowledged within %s", n, within)
}

// stateOf is what an acknowledged item promises: its cursor at least.
func stateOf(r *receiptsv1.Receipt) receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Seq: r.GetSeq()}, MessageID: r.GetMessageId()}
	st := receipt.State{Key: receipt.Key{User: r.GetUserId(), Channel: r.GetChannelId()}, Delivered: c}
	if r.GetKind() == receiptsv1.Kind_READ {
		st.Read = c
	}
	return st
}
