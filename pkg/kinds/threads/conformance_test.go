package threads

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

func randomRef(r *rand.Rand) thread.Ref {
	return thread.Ref{Channel: "c" + strconv.Itoa(r.IntN(2)), Root: 1 + r.Int64N(2)}
}

func randomKey(r *rand.Rand) receipt.Key {
	return receipt.Key{User: "u" + strconv.Itoa(r.IntN(2)), Channel: "c" + strconv.Itoa(r.IntN(2))}
}

// randomHead draws a head over few threads, its message id a function of
// its seq.
func randomHead(r *rand.Rand) any {
	seq := 1 + r.Int64N(40)
	return thread.Head{Ref: randomRef(r), Seq: seq, MessageID: "m" + strconv.FormatInt(seq, 10), UpdatedAtUnixMs: 1 + r.Int64N(1e6)}
}

// randomState draws a register over few keys, each part of it (cursors,
// follow, mentions) alone or together.
func randomState(r *rand.Rand) any {
	k := randomKey(r)
	st := thread.State{Key: thread.Key{User: k.User, Ref: randomRef(r)}}
	// Each part of the register alone or together, so that a rule's
	// part never hides behind another's.
	parts := 1 + r.IntN(7)
	if parts&1 != 0 {
		// Delivered has no epoch (there is no mark-undelivered).
		cur := func(epoch bool) receipt.Cursor {
			seq := 1 + r.Int64N(40)
			c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}
			if epoch {
				c.Position.Epoch = r.Int64N(3)
			}
			return c
		}
		c := receipt.State{Key: k, Delivered: cur(false), DeviceID: "d", UpdatedAtUnixMs: 1 + r.Int64N(1e6)}
		if r.IntN(2) == 0 {
			c.Read = cur(true)
		}
		if r.IntN(3) == 0 {
			c.PrivateRead = receipt.Cursor{Position: cur(true).Position}
		}
		if r.IntN(4) == 0 { // a mark-unread
			c.PrivateRead = thread.MarkUnread(st.Key, 1+r.Int64N(40), r.Int64N(3)).Cursors.PrivateRead
		}
		st.Cursors, _ = receipt.Merge(receipt.State{}, c) // as the gateway hands it on
		st.Cursors.Key = receipt.Key{}
	}
	if parts&2 != 0 {
		st.Follow = thread.Follow{Following: r.IntN(2) == 0, VersionUnixMs: 1 + r.Int64N(5)}
	}
	if parts&4 != 0 {
		seqs := make([]int64, 1+r.IntN(3))
		for i := range seqs {
			seqs[i] = 1 + r.Int64N(30)
		}
		st.Mentions = channel.MergeMentions(nil, seqs, 1000)
	}
	return st
}

// The kinds pass the conformance suite: their rules obey the merge laws,
// and the statements and scripts keep what thread.MergeHead and
// thread.Merge keep.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		k   kind.Kind
		gen kindtest.Gen
	}{{HeadKind, randomHead}, {StateKind, randomState}} {
		t.Run(c.k.Name(), func(t *testing.T) {
			t.Parallel()
			env := kindtest.Env(t)
			// A small mention cap, so that the retention is part of the rule.
			env.MentionCap = 3
			kindtest.MergeLaws(t, c.k, env, c.gen)
			kindtest.StoresAgree(t, c.k, env, c.gen)
		})
	}
}
