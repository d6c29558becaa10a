package e2e

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

// sequentialHistory is a history of n random calls on keys as the
// specification answers them one after another: call i runs in [10i,
// 10i+5] ns, or, with overlap, from well before.
func sequentialHistory(rng *rand.Rand, n, keys int, overlap bool) []porcupine.Operation {
	states := make([]receipt.State, keys)
	var ops []porcupine.Operation
	for i := range n {
		ki := rng.IntN(keys)
		k := lzKey(ki)
		in := lzInput{key: k}
		switch r := rng.Float64(); {
		case r < 0.1:
			in.op, in.seq = "unread", 1+rng.Int64N(20)
		case r < 0.5:
			in.op = "read"
		default:
			in.op, in.seq = "mark", 1+rng.Int64N(30)
		}
		st := states[ki]
		st.Key = k
		out := lzOutput{known: true}
		// The answer the specification gives, from its only next state.
		probe := lzStep(st, in, lzOutput{})
		next := probe[0]
		out.state = lzOf(next)
		_, out.advanced = receipt.Merge(st, next)
		if in.op == "read" {
			out.advanced = false
		}
		states[ki] = next
		call := int64(10 * i)
		if overlap && i > 3 {
			call -= int64(10 * rng.IntN(3))
		}
		ops = append(ops, porcupine.Operation{ClientId: i % 8, Input: in, Call: call, Output: out, Return: int64(10*i + 5)})
	}
	return ops
}

// The checker accepts what the specification answers, sequential or
// overlapping, with failed and degraded calls in it, and refuses a
// history with one answer planted backwards: a read below a mark that
// returned before it began, or a mark answered below an earlier one.
func TestLinearCheckerFindsARegression(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, overlap := range []bool{false, true} {
		ops := sequentialHistory(rng, 3000, 12, overlap)
		v := checkLinear(ops, time.Minute)
		require.True(t, v.ok(), "overlap %v: %s", overlap, v)
	}

	// A failed mark may have taken effect or not; a degraded one did.
	ops := sequentialHistory(rng, 200, 1, false)
	k := lzKey(0)
	n := int64(len(ops))
	failed := porcupine.Operation{ClientId: 9, Input: lzInput{op: "mark", key: k, seq: 10_000}, Call: 10 * n, Output: lzOutput{}, Return: math.MaxInt64}
	readBefore := porcupine.Operation{ClientId: 1, Input: lzInput{op: "read", key: k}, Call: 10*n + 1, Output: ops[len(ops)-1].Output, Return: 10*n + 2}
	require.True(t, checkLinear(append(append(ops[:len(ops):len(ops)], failed), readBefore), time.Minute).ok(), "a failed mark not seen")
	st := lastState(ops, k)
	after, _ := receipt.Merge(st, receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Epoch: st.ReadEpoch(), Seq: 10_000}}, Delivered: receipt.Cursor{Position: receipt.Position{Seq: 10_000}}})
	seen := readBefore
	seen.Output = lzOutput{known: true, state: lzOf(after)}
	require.True(t, checkLinear(append(append(ops[:len(ops):len(ops)], failed), seen), time.Minute).ok(), "a failed mark seen")
	degraded := failed
	degraded.Output, degraded.Return = lzOutput{degraded: true}, 10*n+1
	notSeen := readBefore
	notSeen.Call, notSeen.Return = 10*n+3, 10*n+4
	require.False(t, checkLinear(append(append(ops[:len(ops):len(ops)], degraded), notSeen), time.Minute).ok(), "a degraded mark is applied")

	// Planted: a read answering an earlier state after a mark that moved
	// the key had returned.
	ops = sequentialHistory(rand.New(rand.NewPCG(5, 6)), 3000, 12, true)
	planted := false
	for i := 1; i < len(ops) && !planted; i++ {
		in := ops[i].Input.(lzInput)
		if in.op != "read" || ops[i].Call < ops[i-1].Return {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			prev := ops[j].Input.(lzInput)
			if prev.key != in.key {
				continue
			}
			if prev.op == "mark" && ops[j].Output.(lzOutput).advanced && ops[j].Output.(lzOutput).state.own.Seq > 1 {
				out := ops[i].Output.(lzOutput)
				out.state.read.Seq, out.state.own.Seq = out.state.read.Seq-1, out.state.own.Seq-1
				ops[i].Output = out
				planted = true
			}
			break
		}
	}
	require.True(t, planted)
	v := checkLinear(ops, time.Minute)
	require.Equal(t, porcupine.Illegal, v.result, "the planted regression: %s", v)
	require.Contains(t, v.first, "operations linearize")
}

func lastState(ops []porcupine.Operation, k receipt.Key) receipt.State {
	st := receipt.State{Key: k}
	for _, op := range ops {
		if in := op.Input.(lzInput); in.key == k {
			st = lzStep(st, in, lzOutput{})[0]
		}
	}
	return st
}
