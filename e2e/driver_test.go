package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
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
	// private is the share of READ items that are private reads; epoch the
	// share of items that carry the key's epoch as the client last saw it
	// (from an answer) instead of leaving it to the gateway.
	private, epoch float64
	// retry resends a failed call until it is acknowledged (for at most a
	// minute after halt), as an upstream server would: a call that failed
	// after the gateway merged Redis leaves Redis ahead of the durable
	// path until the retry makes it durable (without the retry only the
	// drift sweep would repair it).
	retry bool
	// pause is how long each client (mark and ops) waits between calls.
	pause time.Duration
}

// driver sends a workload until stopped and records every acknowledged item
// in the model. Only items the gateway acknowledged count: a call that
// failed (gateway killed, 503) may or may not have been applied.
type driver struct {
	w       workload
	m       *model
	h       *history // nil: the model alone
	api     string
	epochs  sync.Map // receipt.Key → *atomic.Int64: the greatest read epoch an answer showed
	stop    chan struct{}
	wg      sync.WaitGroup
	seqs    sync.Map // receipt.Key → *atomic.Int64
	sent    atomic.Int64
	errs    atomic.Int64
	spooled atomic.Int64
}

func startDriver(api string, w workload, m *model, seed uint64) *driver {
	return startRecordingDriver(api, w, m, nil, seed)
}

// startRecordingDriver is startDriver that also records every
// acknowledged item in h.
func startRecordingDriver(api string, w workload, m *model, h *history, seed uint64) *driver {
	d := &driver{w: w, m: m, h: h, api: api, stop: make(chan struct{})}
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

// sawEpoch raises the key's epoch as answers showed it.
func (d *driver) sawEpoch(k receipt.Key, e int64) {
	v, _ := d.epochs.LoadOrStore(k, new(atomic.Int64))
	a := v.(*atomic.Int64)
	for {
		cur := a.Load()
		if e <= cur || a.CompareAndSwap(cur, e) {
			return
		}
	}
}

func (d *driver) epochOf(k receipt.Key) int64 {
	v, _ := d.epochs.LoadOrStore(k, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
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
	for call := 0; ; call++ {
		select {
		case <-d.stop:
			return
		default:
		}
		// One device id per call: the checker finds each acknowledged item's
		// record on the topic by its key, device and seq.
		device := fmt.Sprintf("dev%d-%d", i, call)
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
				MessageId: fmt.Sprintf("m%d", seq), DeviceId: device}
			if kind == receiptsv1.Kind_READ && rng.Float64() < d.w.private {
				r.Private = true
			}
			if kind == receiptsv1.Kind_READ && rng.Float64() < d.w.epoch {
				r.Epoch = proto.Int64(d.epochOf(k))
			}
			req.Receipts = append(req.Receipts, r)
			history = append(history, r)
			if len(history) > 256 {
				history = history[128:]
			}
		}
		resp, ok := d.send(cl, req)
		if !ok {
			return
		}
		if resp == nil {
			continue
		}
		for j, res := range resp.GetResults() {
			r := req.Receipts[j]
			k := receipt.Key{User: r.GetUserId(), Channel: r.GetChannelId()}
			if st := res.GetState(); st != nil {
				d.sawEpoch(k, max(st.GetRead().GetPosition().GetEpoch(), st.GetPrivateRead().GetPosition().GetEpoch()))
			}
			if res.GetDurability() == receiptsv1.Durability_DURABILITY_UNSPECIFIED {
				continue
			}
			if res.GetDurability() == receiptsv1.Durability_SPOOLED {
				d.spooled.Add(1)
			}
			d.m.ack(stateOf(r))
			if d.h != nil {
				d.h.ack(markWrite(k, markKind(r), r.GetSeq(), r.Epoch, r.GetDeviceId(), res.GetDurability().String()))
			}
		}
		if d.w.pause > 0 {
			time.Sleep(d.w.pause)
		}
	}
}

// send makes one call, and with retry resends it until it is acknowledged.
// It returns the answer (nil: failed, not retried), and false when the
// driver halted without an answer.
func (d *driver) send(cl receiptsv1connect.ReceiptServiceClient, req *receiptsv1.MarkReceiptsRequest) (*receiptsv1.MarkReceiptsResponse, bool) {
	var deadline time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		resp, err := cl.MarkReceipts(ctx, connect.NewRequest(req))
		cancel()
		d.sent.Add(int64(len(req.Receipts)))
		if err == nil {
			return resp.Msg, true
		}
		d.errs.Add(1)
		if !d.w.retry || !retryable(err) {
			select {
			case <-d.stop:
				return nil, false
			case <-time.After(50 * time.Millisecond): // a client's back-off, not synchronisation
			}
			return nil, true
		}
		select {
		case <-d.stop:
			if deadline.IsZero() {
				deadline = time.Now().Add(time.Minute)
			}
			if time.Now().After(deadline) {
				return nil, false
			}
		default:
		}
		time.Sleep(100 * time.Millisecond) // a client's back-off between retries, not synchronisation
	}
}

// retryable reports whether a failed call may succeed when sent again, as
// an upstream server decides it: by the refusal's reason when it has one
// (a race with a message notice, a store or a limit that recovers), else
// by its code (a gateway that went away gives no reason).
func retryable(err error) bool {
	switch apierr.ReasonOf(err) {
	case apierr.HeadBehind, apierr.Unavailable, apierr.RateLimited, apierr.DeadlineExceeded, apierr.Canceled:
		return true
	case "":
		switch connect.CodeOf(err) {
		case connect.CodeInvalidArgument, connect.CodePermissionDenied, connect.CodeFailedPrecondition, connect.CodeNotFound:
			return false
		}
		return true
	}
	return false
}

// markKind names the cursor a mark moves, as markWrite expects it.
func markKind(r *receiptsv1.Receipt) string {
	switch {
	case r.GetKind() == receiptsv1.Kind_DELIVERED:
		return "delivered"
	case r.GetPrivate():
		return "private"
	}
	return "read"
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

// stateOf is what an acknowledged item promises: its cursor at least (at
// the epoch it carried, else at 0: the gateway resolves it to the key's
// current epoch, which is not lower).
func stateOf(r *receiptsv1.Receipt) receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Epoch: r.GetEpoch(), Seq: r.GetSeq()}, MessageID: r.GetMessageId()}
	st := receipt.State{Key: receipt.Key{User: r.GetUserId(), Channel: r.GetChannelId()}}
	switch {
	case r.GetKind() == receiptsv1.Kind_DELIVERED:
		c.Position.Epoch = 0
		st.Delivered = c
	case r.GetPrivate():
		c.MessageID = ""
		st.PrivateRead = c
	default:
		st.Read = c
		st.Delivered = receipt.Cursor{Position: receipt.Position{Seq: r.GetSeq()}, MessageID: r.GetMessageId()}
	}
	return st
}

// The drivers retry what an upstream server retries: a race with a notice
// (HEAD_BEHIND, 409 over REST), a store or limit that recovers, and a
// failure without a reason unless its code says the request is at fault;
// never a refusal of the request itself, whatever its protocol.
func TestRetryableByReason(t *testing.T) {
	t.Parallel()
	refusal := func(code connect.Code, reason apierr.Reason) error {
		return apierr.New(code, reason, errors.New("refused"))
	}
	restBody := func(code connect.Code, reason apierr.Reason) []byte {
		return apierr.StatusJSON(refusal(code, reason))
	}
	for _, c := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"head behind", refusal(connect.CodeAborted, apierr.HeadBehind), true},
		{"head behind over REST", restRefusal("POST", "/v1/users/u/channels/c/read", 409, restBody(connect.CodeAborted, apierr.HeadBehind)), true},
		{"unavailable", refusal(connect.CodeUnavailable, apierr.Unavailable), true},
		{"rate limited over REST", restRefusal("POST", "/v1/receipts:mark", 429, restBody(connect.CodeResourceExhausted, apierr.RateLimited)), true},
		{"gateway gone", connect.NewError(connect.CodeUnavailable, errors.New("connection refused")), true},
		{"proxy page", restRefusal("POST", "/v1/receipts:mark", 502, []byte("<html>bad gateway</html>")), true},
		{"bad seq", refusal(connect.CodeInvalidArgument, apierr.InvalidSeq), false},
		{"bad seq over REST", restRefusal("POST", "/v1/users/u/channels/c/read", 400, restBody(connect.CodeInvalidArgument, apierr.InvalidSeq)), false},
		{"not a member", refusal(connect.CodePermissionDenied, apierr.NotAMember), false},
		{"epoch ahead", refusal(connect.CodeInvalidArgument, apierr.EpochAhead), false},
		{"invalid without a reason", connect.NewError(connect.CodeInvalidArgument, errors.New("unknown field")), false},
	} {
		if got := retryable(c.err); got != c.retry {
			t.Errorf("%s: retryable = %v, want %v (%v)", c.name, got, c.retry, c.err)
		}
	}
}
