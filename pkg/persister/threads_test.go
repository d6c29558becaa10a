package persister_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/tombstone"
)

// randomThreadState draws a user's thread register as the gateway hands
// it on: cursors, a follow or mentions, alone or together.
func randomThreadState(r *rand.Rand, user string, at int64) thread.State {
	ref := thread.Ref{Channel: "c" + strconv.Itoa(r.IntN(2)), Root: 1 + r.Int64N(3)}
	st := thread.State{Key: thread.Key{User: user, Ref: ref}}
	parts := 1 + r.IntN(7)
	if parts&1 != 0 {
		seq := 1 + r.Int64N(30)
		c := receipt.State{Key: st.Key.ChannelKey(), DeviceID: "d", UpdatedAtUnixMs: at,
			Delivered: receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: "m" + strconv.FormatInt(seq, 10)}}
		if r.IntN(2) == 0 {
			read := 1 + r.Int64N(30)
			c.Read = receipt.Cursor{Position: receipt.Position{Epoch: r.Int64N(2), Seq: read}, MessageID: "m" + strconv.FormatInt(read, 10)}
		}
		st.Cursors, _ = receipt.Merge(receipt.State{}, c)
		st.Cursors.Key = receipt.Key{}
	}
	if parts&2 != 0 {
		st.Follow = thread.Follow{Following: r.IntN(2) == 0, VersionUnixMs: at - r.Int64N(5)}
	}
	if parts&4 != 0 {
		st.Mentions = channel.MergeMentions(nil, []int64{1 + r.Int64N(30), 1 + r.Int64N(30)}, 1000)
	}
	return st
}

func (b *bundle) threadRows() (map[thread.Key]thread.State, map[thread.Ref]thread.Head) {
	b.t.Helper()
	ctx := context.Background()
	states, err := threads.NewStore(b.schema.Store, nil).StatesPagePG(ctx, thread.Key{}, false, 10_000)
	require.NoError(b.t, err)
	heads, err := threads.NewStore(b.schema.Store, nil).HeadsPagePG(ctx, thread.Ref{}, false, 10_000)
	require.NoError(b.t, err)
	byKey := map[thread.Key]thread.State{}
	for _, st := range states {
		byKey[st.Key] = st
	}
	byRef := map[thread.Ref]thread.Head{}
	for _, h := range heads {
		byRef[h.Ref] = h
	}
	return byKey, byRef
}

// Thread events reach Postgres through the kinds seam alone: the rows
// equal the Go fold of the events (thread.Merge with the configured
// mention cap, thread.MergeHead), and an erasure drops the user's thread
// registers and every register event that predates it, keeping other
// users' and the thread heads (which belong to no user).
func TestThreadEventsPersistAsTheirFold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.config(prometheus.NewRegistry())
	const mentionCap = 3
	cfg.MentionCap = mentionCap
	b.start(cfg)

	const erasedAt = 1_700_000_100_000
	r := rand.New(rand.NewPCG(3, 5))
	states := map[thread.Key]thread.State{}
	heads := map[thread.Ref]thread.Head{}
	var recs []*kgo.Record
	for i := range 200 {
		at := int64(erasedAt - 50_000 + i)
		if r.IntN(3) == 0 {
			seq := 1 + r.Int64N(40)
			h := thread.Head{Ref: thread.Ref{Channel: "c" + strconv.Itoa(r.IntN(2)), Root: 1 + r.Int64N(3)},
				Seq: seq, MessageID: "m" + strconv.FormatInt(seq, 10), UpdatedAtUnixMs: at}
			heads[h.Ref], _ = thread.MergeHead(heads[h.Ref], h)
			rec, err := event.EncodeThreadHead(h)
			require.NoError(t, err)
			recs = append(recs, rec)
			continue
		}
		st := randomThreadState(r, []string{"gone", "kept"}[r.IntN(2)], at)
		stored, ok := states[st.Key]
		if !ok {
			stored = thread.State{Key: st.Key}
		}
		states[st.Key], _ = thread.Merge(stored, st, mentionCap)
		rec, err := event.EncodeThread(st, 0, false)
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	b.produce(b.cl, recs...)
	b.requireCommittedToEnd()

	requireFold := func(states map[thread.Key]thread.State) {
		t.Helper()
		gotStates, gotHeads := b.threadRows()
		require.Len(t, gotStates, len(states))
		for k, want := range states {
			got, ok := gotStates[k]
			require.True(t, ok, "no row of %s %s", k.User, k.Ref)
			require.True(t, thread.Same(want, got), "%s %s: postgres holds %+v, the fold %+v", k.User, k.Ref, got, want)
		}
		require.Len(t, gotHeads, len(heads))
		for ref, want := range heads {
			require.Equal(t, want, gotHeads[ref], ref.String())
		}
	}
	requireFold(states)
	require.Positive(t, b.userRowCounts("gone")["thread_states"])

	// The erasure, then a register event in flight from before it
	// (dropped) and one accepted well after it (written).
	erasure := tombstone.Tombstone{User: "gone", Generation: erasedAt, ErasedAtUnixMs: erasedAt}
	before := randomThreadState(r, "gone", erasedAt-10)
	after := thread.State{Key: thread.Key{User: "gone", Ref: thread.Ref{Channel: "c9", Root: 1}},
		Follow: thread.Follow{Following: true, VersionUnixMs: erasedAt + tombstone.ClockSkew.Milliseconds() + 1}}
	beforeRec, err := event.EncodeThread(before, 0, false)
	require.NoError(t, err)
	afterRec, err := event.EncodeThread(after, 0, false)
	require.NoError(t, err)
	b.produce(b.cl, encodeAny(t, event.Decoded{Erasure: &erasure}), beforeRec, afterRec)
	b.requireCommittedToEnd()

	for k := range states {
		if k.User == "gone" {
			delete(states, k)
		}
	}
	states[after.Key] = after
	requireFold(states)
	require.Equal(t, 1, b.userRowCounts("gone")["thread_states"])
	require.Zero(t, b.dltEnd(), "dropped events are not dead letters")
}
