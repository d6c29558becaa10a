package threads

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kind/kindtest"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// pos is a cursor at (e, s) with the id of its message.
func pos(e, s int64) receipt.Cursor {
	if s <= 0 {
		return cursorAt(e, s, "")
	}
	return cursorAt(e, s, "m"+strconv.FormatInt(e, 10)+"."+strconv.FormatInt(s, 10))
}

// canonicalThreadState is what a store keeps of a register: the private
// read only while ahead of the read, and without its message id.
func canonicalThreadState(st thread.State) thread.State {
	st.Cursors = st.Cursors.Canonical()
	st.Cursors.Key = receipt.Key{}
	st.Cursors.PrivateRead.MessageID = ""
	if len(st.Mentions) == 0 {
		st.Mentions = nil
	}
	return st
}

// randomCursor is a position with the id of its message, or now and then
// another id at the same position (ties keep the stored id).
func randomCursor(rng *rand.Rand, epochs int64) receipt.Cursor {
	c := pos(rng.Int64N(epochs), rng.Int64N(12))
	if c.MessageID != "" && rng.IntN(5) == 0 {
		c.MessageID += "'"
	}
	return c
}

func randomRow(rng *rand.Rand, k thread.Key) thread.State {
	st := thread.State{Key: k}
	c := &st.Cursors
	switch rng.IntN(4) {
	case 0: // a follow or mentions alone
	default:
		c.Read = randomCursor(rng, 3)
		c.Delivered = randomCursor(rng, 1) // delivered epochs are always 0
		if rng.IntN(2) == 0 {
			c.PrivateRead = randomCursor(rng, 3)
		}
		c.DeviceID = "d" + strconv.Itoa(rng.IntN(3))
		c.UpdatedAtUnixMs = 1 + rng.Int64N(50)
	}
	if rng.IntN(2) == 0 {
		st.Follow = thread.Follow{Following: rng.IntN(2) == 0, VersionUnixMs: rng.Int64N(5)}
	}
	for range rng.IntN(4) {
		st.Mentions = append(st.Mentions, 1+rng.Int64N(15))
	}
	return st
}

// The SQL merges agree with thread.Merge and thread.MergeHead: random
// registers of a few keys, applied in random orders and batch splits with
// duplicates, end with exactly what folding the rules over the same
// batches gives (device, time and tied message ids included), and with
// the positions, follow and mentions of a fold in any other order.
func TestThreadSQLMergesMatchTheRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const capN = 3
	s := NewStore(pgtest.NewSchema(t).Store, nil).WithMentionCap(capN)
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 30 {
		var keys []thread.Key
		for u := range 2 {
			for c := range 2 {
				for r := range 2 {
					keys = append(keys, thread.Key{User: "u" + strconv.Itoa(u), Ref: thread.Ref{Channel: "t" + strconv.Itoa(trial) + "c" + strconv.Itoa(c), Root: int64(1 + r)}})
				}
			}
		}
		n := 5 + rng.IntN(40)
		states := make([]thread.State, n)
		heads := make([]thread.Head, n)
		for i := range n {
			k := keys[rng.IntN(len(keys))]
			states[i] = randomRow(rng, k)
			heads[i] = thread.Head{Ref: k.Ref, Seq: 1 + rng.Int64N(20), UpdatedAtUnixMs: rng.Int64N(40)}
			heads[i].MessageID = "h" + strconv.FormatInt(heads[i].Seq, 10)
			if rng.IntN(4) == 0 {
				heads[i].MessageID += "'"
			}
		}
		order := kindtest.Replay(rng, n)

		want := map[thread.Key]thread.State{}
		wantHeads := map[thread.Ref]thread.Head{}
		for len(order) > 0 {
			size := 1 + rng.IntN(min(len(order), 8))
			batch := order[:size]
			order = order[size:]
			// A caller dedupes per key first, folding in arrival order.
			perKey := map[thread.Key]thread.State{}
			perRef := map[thread.Ref]thread.Head{}
			for _, i := range batch {
				perKey[states[i].Key], _ = thread.Merge(perKey[states[i].Key], states[i], capN)
				perRef[heads[i].Ref], _ = thread.MergeHead(perRef[heads[i].Ref], heads[i])
			}
			var sts []thread.State
			var moved int64
			for k, in := range perKey {
				sts = append(sts, in)
				old, had := want[k]
				var m bool
				want[k], m = thread.Merge(old, in, capN)
				if m || !had {
					moved++
				}
			}
			var hs []thread.Head
			var headsMoved int64
			for r, in := range perRef {
				hs = append(hs, in)
				old, had := wantHeads[r]
				next, _ := thread.MergeHead(old, in)
				if !had || next != old {
					headsMoved++
				}
				wantHeads[r] = next
			}
			rng.Shuffle(len(sts), func(i, j int) { sts[i], sts[j] = sts[j], sts[i] })
			got, err := s.WriteStatesPG(ctx, sts)
			require.NoError(t, err)
			require.Equal(t, moved, got, "trial %d: rows changed", trial)
			got, err = s.WriteHeadsPG(ctx, hs)
			require.NoError(t, err)
			require.Equal(t, headsMoved, got, "trial %d: heads changed", trial)
		}

		gotStates, err := s.StatesPG(ctx, keys)
		require.NoError(t, err)
		require.Len(t, gotStates, len(want))
		inGenerationOrder := map[thread.Key]thread.State{}
		for _, st := range states {
			inGenerationOrder[st.Key], _ = thread.Merge(inGenerationOrder[st.Key], st, capN)
		}
		for _, got := range gotStates {
			require.Equal(t, canonicalThreadState(want[got.Key]), got, "trial %d: key %v", trial, got.Key)
			require.True(t, thread.Same(inGenerationOrder[got.Key], got), "trial %d: key %v in generation order", trial, got.Key)
		}

		refs := make([]thread.Ref, 0, len(keys))
		for _, k := range keys {
			refs = append(refs, k.Ref)
		}
		gotHeads, err := s.HeadsPG(ctx, refs)
		require.NoError(t, err)
		require.Len(t, gotHeads, len(wantHeads))
		for _, h := range gotHeads {
			require.Equal(t, wantHeads[h.Ref], h, "trial %d: head %v", trial, h.Ref)
		}
	}
}

func threadKey(user, ch string, root int64) thread.Key {
	return thread.Key{User: user, Ref: thread.Ref{Channel: ch, Root: root}}
}

func TestThreadReadsAndPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewStore(pgtest.NewSchema(t).Store, nil)
	var written []thread.State
	for _, u := range []string{"ann", "bob", "cy"} {
		for _, ch := range []string{"a", "b"} {
			for root := int64(1); root <= 3; root++ {
				st := thread.State{Key: threadKey(u, ch, root), Follow: thread.Follow{Following: true, VersionUnixMs: 7}}
				st.Cursors.Read, st.Cursors.Delivered = pos(0, root+1), pos(0, root+2)
				st.Cursors.DeviceID, st.Cursors.UpdatedAtUnixMs = "d", 100
				if root == 2 {
					st.Mentions = []int64{root + 1, root + 5}
				}
				written = append(written, st)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	shuffled := slices.Clone(written)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	n, err := s.WriteStatesPG(ctx, shuffled)
	require.NoError(t, err)
	require.EqualValues(t, len(written), n)
	n, err = s.WriteStatesPG(ctx, shuffled)
	require.NoError(t, err)
	require.Zero(t, n, "a replay changes nothing")

	got, err := s.StatesPG(ctx, []thread.Key{threadKey("cy", "b", 3), threadKey("ann", "a", 2), threadKey("nobody", "a", 1), threadKey("ann", "a", 2)})
	require.NoError(t, err)
	require.Equal(t, []thread.State{written[1], written[17]}, got, "key order, missing keys left out")

	mine, err := s.UserStatesPG(ctx, "bob", "", 100)
	require.NoError(t, err)
	require.Equal(t, written[6:12], mine)
	mine, err = s.UserStatesPG(ctx, "bob", "b", 2)
	require.NoError(t, err)
	require.Equal(t, written[9:11], mine)

	var walked []thread.State
	var after thread.Key
	hasAfter := false
	for {
		p, err := s.StatesPagePG(ctx, after, hasAfter, 4)
		require.NoError(t, err)
		if len(p) == 0 {
			break
		}
		walked = append(walked, p...)
		after, hasAfter = p[len(p)-1].Key, true
	}
	require.Equal(t, written, walked)

	members, err := s.MemberStatesPG(ctx, thread.Ref{Channel: "b", Root: 1}, []string{"cy", "ann", "zed"})
	require.NoError(t, err)
	require.Equal(t, []thread.State{written[3], written[15]}, members)

	// A private read not ahead of the read is not returned; one ahead is,
	// without its message id.
	behind := thread.State{Key: threadKey("ann", "a", 1)}
	behind.Cursors.PrivateRead = pos(0, 1)
	_, err = s.WriteStatesPG(ctx, []thread.State{behind})
	require.NoError(t, err)
	ahead := thread.State{Key: threadKey("ann", "a", 2)}
	ahead.Cursors.PrivateRead = pos(0, 9)
	_, err = s.WriteStatesPG(ctx, []thread.State{ahead})
	require.NoError(t, err)
	got, err = s.StatesPG(ctx, []thread.Key{behind.Key, ahead.Key})
	require.NoError(t, err)
	require.Equal(t, written[0], got[0])
	require.Equal(t, receipt.Cursor{Position: receipt.Position{Seq: 9}}, got[1].Cursors.PrivateRead)
	require.Equal(t, receipt.Position{Seq: 9}, got[1].Cursors.EffectiveRead())

	heads := []thread.Head{
		{Ref: thread.Ref{Channel: "b", Root: 1}, Seq: 4, MessageID: "x", UpdatedAtUnixMs: 5},
		{Ref: thread.Ref{Channel: "a", Root: 2}, Seq: 3, UpdatedAtUnixMs: 5},
		{Ref: thread.Ref{Channel: "a", Root: 10}, Seq: 1, UpdatedAtUnixMs: 5},
	}
	_, err = s.WriteHeadsPG(ctx, heads)
	require.NoError(t, err)
	hs, err := s.HeadsPG(ctx, []thread.Ref{{Channel: "b", Root: 1}, {Channel: "a", Root: 2}, {Channel: "z", Root: 1}})
	require.NoError(t, err)
	require.Equal(t, []thread.Head{heads[1], heads[0]}, hs)
	hp, err := s.HeadsPagePG(ctx, thread.Ref{}, false, 2)
	require.NoError(t, err)
	require.Equal(t, []thread.Head{heads[1], heads[2]}, hp)
	hp, err = s.HeadsPagePG(ctx, thread.Ref{Channel: "a", Root: 2}, true, 10)
	require.NoError(t, err)
	require.Equal(t, []thread.Head{heads[2], heads[0]}, hp)

	// A bounded CHECK rejects bad rows (the persister dead-letters them).
	_, err = s.WriteHeadsPG(ctx, []thread.Head{{Ref: thread.Ref{Channel: "x", Root: 0}, Seq: 1}})
	require.ErrorIs(t, err, pgstore.ErrRejected)
	_, err = s.WriteStatesPG(ctx, []thread.State{{Key: threadKey("u", "x", 1), Mentions: []int64{-1}}})
	require.ErrorIs(t, err, pgstore.ErrRejected)
	_, err = s.WriteStatesPG(ctx, []thread.State{{Key: threadKey("", "x", 1)}})
	require.ErrorIs(t, err, pgstore.ErrRejected)
}

// An erasure deletes the user's thread registers and nothing else: not
// another user's register in the same thread, not the thread's head.
func TestEraseDeletesTheUsersThreadStatesOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewStore(pgtest.NewSchema(t).Store, nil)
	ref := thread.Ref{Channel: "c", Root: 3}
	var sts []thread.State
	for _, u := range []string{"gone", "kept"} {
		for root := int64(1); root <= 3; root++ {
			sts = append(sts, thread.State{Key: threadKey(u, "c", root), Follow: thread.Follow{Following: true, VersionUnixMs: 1}})
		}
	}
	_, err := s.WriteStatesPG(ctx, sts)
	require.NoError(t, err)
	_, err = s.WriteHeadsPG(ctx, []thread.Head{{Ref: ref, Seq: 5, UpdatedAtUnixMs: 1}})
	require.NoError(t, err)

	deleted, err := s.pg.EraseAgain(ctx, "gone", pgstore.Erasure{Deletes: []string{eraseSQL}})
	require.NoError(t, err)
	require.EqualValues(t, 3, deleted)
	left, err := s.StatesPagePG(ctx, thread.Key{}, false, 100)
	require.NoError(t, err)
	require.Equal(t, sts[3:], left)
	hs, err := s.HeadsPG(ctx, []thread.Ref{ref})
	require.NoError(t, err)
	require.Len(t, hs, 1)
}
