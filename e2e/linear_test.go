package e2e

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
)

// The linearizability workload: a few clients mark, mark unread and read
// a few keys over REST as fast as they can, and every call is recorded
// with when it was sent and answered. Once quiet, porcupine checks that
// each key's history is linearizable against the key's sequential
// specification: the max-register of pkg/receipt (receipt.Merge,
// receipt.MarkUnread), on the positions a client sees (the public read,
// the user's own read, delivered).
//
// A call that failed may or may not have taken effect, at any moment
// after it was sent (porcupine: it never returns). A mark answered
// realtime_degraded took effect (it is durable) but its answer says
// nothing. Either may have had its epoch resolved by Postgres, possibly
// to an older one (pkg/gate's resolveEpochs, when Redis could not
// answer), so it may have applied at any epoch up to the current one.
// Reads that failed constrain nothing and are left out.

// linearLoad is the shape of the workload.
type linearLoad struct {
	clients, keys int
	// unread, read: shares of mark-unread calls and reads; the rest marks.
	unread, read float64
	pause        time.Duration
}

var linearDefault = linearLoad{clients: 8, keys: 12, unread: 0.04, read: 0.35, pause: time.Millisecond}

// lzInput is one call: a mark at seq, a mark-unread from seq, or a read.
type lzInput struct {
	op  string // "mark", "unread", "read"
	key receipt.Key
	seq int64
}

// lzOutput is what a call answered; known false: nothing (failed, or a
// degraded mark).
type lzOutput struct {
	known    bool
	state    lzState
	advanced bool
	// degraded: a mark answered realtime_degraded (applied, at an epoch
	// Postgres resolved).
	degraded bool
}

// lzState is a key's positions as clients see them.
type lzState struct {
	read, own receipt.Position
	delivered int64
}

func lzOf(st receipt.State) lzState {
	st = st.Canonical()
	return lzState{read: st.Read.Position, own: st.EffectiveRead(), delivered: st.Delivered.Position.Seq}
}

// lzStep is the specification: every state the call may lead to from st
// with its answer (none: the answer is impossible from st).
func lzStep(st receipt.State, in lzInput, out lzOutput) []receipt.State {
	var next []receipt.State
	apply := func(inc receipt.State) {
		n, moved := receipt.Merge(st, inc)
		n = n.Canonical()
		if out.known && (lzOf(n) != out.state || moved != out.advanced) {
			return
		}
		next = append(next, n)
	}
	k := in.key
	switch in.op {
	case "read":
		if !out.known || lzOf(st) == out.state {
			return []receipt.State{st}
		}
		return nil
	case "mark":
		mark := func(epoch int64) receipt.State {
			return receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: in.seq}}, Delivered: receipt.Cursor{Position: receipt.Position{Seq: in.seq}}}
		}
		apply(mark(st.ReadEpoch()))
		if !out.known {
			// Degraded, or failed after it may have been produced: its
			// epoch may have been resolved by Postgres, behind Redis.
			for e := range st.ReadEpoch() {
				apply(mark(e))
			}
			if !out.degraded {
				next = append(next, st) // a failed call that did nothing
			}
		}
	case "unread":
		apply(receipt.MarkUnread(k, in.seq, st.ReadEpoch()))
		if !out.known {
			next = append(next, st)
		}
	}
	return next
}

// linearModel is the porcupine model, partitioned by key.
func linearModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[receipt.Key][]porcupine.Operation{}
			var order []receipt.Key
			for _, op := range h {
				k := op.Input.(lzInput).key
				if _, ok := by[k]; !ok {
					order = append(order, k)
				}
				by[k] = append(by[k], op)
			}
			out := make([][]porcupine.Operation, len(order))
			for i, k := range order {
				out[i] = by[k]
			}
			return out
		},
		Init: func() []any { return []any{receipt.State{}} },
		Step: func(state, input, output any) []any {
			in := input.(lzInput)
			st := state.(receipt.State)
			st.Key = in.key
			var out []any
			for _, n := range lzStep(st, in, output.(lzOutput)) {
				n.Key = receipt.Key{}
				out = append(out, n)
			}
			return out
		},
		Equal: func(a, b any) bool { return lzOf(a.(receipt.State)) == lzOf(b.(receipt.State)) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(lzInput), output.(lzOutput)
			if !out.known {
				return fmt.Sprintf("%s %d -> ?", in.op, in.seq)
			}
			return fmt.Sprintf("%s %d -> read %v own %v delivered %d advanced %v", in.op, in.seq, out.state.read, out.state.own, out.state.delivered, out.advanced)
		},
		DescribeState: func(state any) string {
			s := lzOf(state.(receipt.State))
			return fmt.Sprintf("read %v own %v delivered %d", s.read, s.own, s.delivered)
		},
	}
	return nm.ToModel()
}

// linearizer runs the workload and records its history.
type linearizer struct {
	w    linearLoad
	api  string
	stop chan struct{}
	wg   sync.WaitGroup
	t0   time.Time

	mu                      sync.Mutex
	ops                     []porcupine.Operation
	calls, failed, degraded atomic.Int64
	// frontier is each key's greatest mark seq sent.
	frontier []atomic.Int64
}

func startLinearizer(api string, w linearLoad, seed uint64) *linearizer {
	lz := &linearizer{w: w, api: api, stop: make(chan struct{}), t0: time.Now(), frontier: make([]atomic.Int64, w.keys)}
	for i := range w.clients {
		lz.wg.Go(func() { lz.client(i, seed+uint64(i)) })
	}
	return lz
}

func (lz *linearizer) halt() {
	close(lz.stop)
	lz.wg.Wait()
}

// lzKey is key i of the workload: users and channels of their own (no
// members: marks need no join).
func lzKey(i int) receipt.Key {
	return receipt.Key{User: "lz" + strconv.Itoa(i%6), Channel: "lzc" + strconv.Itoa(i/6)}
}

func (lz *linearizer) client(id int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	hc := &http.Client{Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()
	for {
		select {
		case <-lz.stop:
			return
		default:
		}
		ki := rng.IntN(lz.w.keys)
		k := lzKey(ki)
		in := lzInput{key: k}
		f := &lz.frontier[ki]
		switch r := rng.Float64(); {
		case r < lz.w.unread:
			in.op, in.seq = "unread", max(1, f.Load()-rng.Int64N(20))
		case r < lz.w.unread+lz.w.read:
			in.op = "read"
		default:
			// Mostly ahead, sometimes behind (a reordered or late mark).
			in.op, in.seq = "mark", max(1, f.Add(1+rng.Int64N(3))-rng.Int64N(8))
		}
		call := time.Since(lz.t0).Nanoseconds()
		out, ok := lz.do(hc, in)
		ret := time.Since(lz.t0).Nanoseconds()
		lz.calls.Add(1)
		if !ok {
			lz.failed.Add(1)
			if in.op == "read" {
				continue // a failed read constrains nothing
			}
			ret = math.MaxInt64 // may take effect at any time after it was sent
		}
		if out.degraded {
			lz.degraded.Add(1)
		}
		lz.mu.Lock()
		lz.ops = append(lz.ops, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
		lz.mu.Unlock()
		if lz.w.pause > 0 {
			time.Sleep(lz.w.pause) // pacing, not synchronisation
		}
	}
}

// do sends one call over REST; ok false: it failed (no answer to hold
// the system to).
func (lz *linearizer) do(hc *http.Client, in lzInput) (lzOutput, bool) {
	base := "http://" + lz.api + "/v1/users/" + in.key.User
	var (
		req *http.Request
		err error
	)
	switch in.op {
	case "read":
		req, err = http.NewRequest(http.MethodGet, base+"/read-state?channel_id="+in.key.Channel, nil)
	case "mark":
		req, err = http.NewRequest(http.MethodPost, base+"/channels/"+in.key.Channel+"/read", bytes.NewBufferString(`{"seq": `+strconv.FormatInt(in.seq, 10)+`}`))
	case "unread":
		req, err = http.NewRequest(http.MethodPost, base+"/channels/"+in.key.Channel+"/unread", bytes.NewBufferString(`{"seq": `+strconv.FormatInt(in.seq, 10)+`}`))
	}
	if err != nil {
		return lzOutput{}, false
	}
	req.Header.Set("Content-Type", "application/json")
	// The user's own end-user token: what a browser or app would send.
	req.Header.Set("Authorization", "Bearer "+endUserToken(in.key.User))
	resp, err := hc.Do(req)
	if err != nil {
		return lzOutput{}, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return lzOutput{}, false
	}
	if in.op == "read" {
		var rs receiptsv1.GetReadStateResponse
		if protojson.Unmarshal(body, &rs) != nil {
			return lzOutput{}, false
		}
		var st receipt.State
		if cs := rs.GetChannels(); len(cs) == 1 {
			st = lzStateOf(in.key, cs[0])
		}
		return lzOutput{known: true, state: lzOf(st)}, true
	}
	var mr receiptsv1.MarkResponse
	if protojson.Unmarshal(body, &mr) != nil {
		return lzOutput{}, false
	}
	r := mr.GetResult()
	if r.GetRealtimeDegraded() {
		return lzOutput{degraded: true}, true
	}
	return lzOutput{known: true, state: lzOf(lzStateOf(in.key, r.GetState())), advanced: r.GetAdvanced()}, true
}

func lzStateOf(k receipt.Key, cs *receiptsv1.ChannelState) receipt.State {
	if cs == nil {
		return receipt.State{Key: k}
	}
	return receipt.State{Key: k, Read: event.CursorFromProto(cs.GetRead()), PrivateRead: event.CursorFromProto(cs.GetPrivateRead()),
		Delivered: event.CursorFromProto(cs.GetDelivered())}
}

// linearVerdict is the checker's verdict on a history.
type linearVerdict struct {
	ops, keys int
	result    porcupine.CheckResult
	// first describes a violation: the key and the longest linearizable
	// prefix's last operations.
	first string
}

func (v linearVerdict) ok() bool { return v.result == porcupine.Ok }

func (v linearVerdict) String() string {
	return fmt.Sprintf("%d operations over %d keys: %s %s", v.ops, v.keys, v.result, v.first)
}

// check runs porcupine over the history (bounded by timeout: a history
// it cannot decide in time is Unknown, which fails the check as well).
func checkLinear(ops []porcupine.Operation, timeout time.Duration) linearVerdict {
	keys := map[receipt.Key]bool{}
	for _, op := range ops {
		keys[op.Input.(lzInput).key] = true
	}
	v := linearVerdict{ops: len(ops), keys: len(keys)}
	var info porcupine.LinearizationInfo
	v.result, info = porcupine.CheckOperationsVerbose(linearModel(), ops, timeout)
	if v.result != porcupine.Ok {
		v.first = describeViolation(ops, info)
	}
	return v
}

// describeViolation names the key whose history does not linearize and
// the last operations of its longest linearizable prefix.
func describeViolation(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	perKey := map[receipt.Key]int{}
	for _, op := range ops {
		perKey[op.Input.(lzInput).key]++
	}
	model := linearModel()
	for _, partials := range info.PartialLinearizationsOperations() {
		var longest []porcupine.Operation
		for _, p := range partials {
			if len(p) > len(longest) {
				longest = p
			}
		}
		if len(longest) == 0 {
			continue
		}
		k := longest[0].Input.(lzInput).key
		if len(longest) >= perKey[k] {
			continue
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "key %s: %d of %d operations linearize; the last of them:", k.KafkaKey(), len(longest), perKey[k])
		var last int64
		for _, op := range longest[max(0, len(longest)-4):] {
			fmt.Fprintf(&b, " [%s @%d]", model.DescribeOperation(op.Input, op.Output), op.Call)
			last = max(last, op.Call)
		}
		// The calls of the key that follow, in the order they were sent.
		in := map[int64]bool{}
		for _, op := range longest {
			in[op.Call] = true
		}
		// The calls sent before the last of them that none of the
		// prefixes could place: the likeliest culprits.
		b.WriteString("; sent before it, not placed:")
		n := 0
		for _, op := range sortedByCall(ops) {
			if op.Input.(lzInput).key == k && !in[op.Call] && op.Call < last && n < 6 {
				fmt.Fprintf(&b, " [%s @%d..%s]", model.DescribeOperation(op.Input, op.Output), op.Call, returnOf(op))
				n++
			}
		}
		b.WriteString("; then:")
		n = 0
		for _, op := range sortedByCall(ops) {
			if op.Input.(lzInput).key == k && !in[op.Call] && op.Call >= last && n < 6 {
				fmt.Fprintf(&b, " [%s @%d..%s]", model.DescribeOperation(op.Input, op.Output), op.Call, returnOf(op))
				n++
			}
		}
		return b.String()
	}
	return ""
}

// returnOf is when op returned, or "never" (a failed call).
func returnOf(op porcupine.Operation) string {
	if op.Return == math.MaxInt64 {
		return "never"
	}
	return strconv.FormatInt(op.Return, 10)
}

// linearAfterFault is how many calls the linearizability workload makes
// after a fault before the load stops.
const linearAfterFault = 3000

// recorded is how many calls the history holds.
func (lz *linearizer) recorded() int {
	lz.mu.Lock()
	defer lz.mu.Unlock()
	return len(lz.ops)
}

// waitOps waits until the history holds n calls.
func (lz *linearizer) waitOps(t *testing.T, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return lz.recorded() >= n }, within, 20*time.Millisecond,
		"the linearizability workload made fewer than %d calls", n)
}

func (lz *linearizer) history() []porcupine.Operation {
	lz.mu.Lock()
	defer lz.mu.Unlock()
	return append([]porcupine.Operation(nil), lz.ops...)
}

// finish halts the workload and checks its history.
func (lz *linearizer) finish() linearVerdict {
	lz.halt()
	return checkLinear(lz.history(), 2*time.Minute)
}

func sortedByCall(ops []porcupine.Operation) []porcupine.Operation {
	out := slices.Clone(ops)
	slices.SortFunc(out, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	return out
}
