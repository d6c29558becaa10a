package threads

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// setupFollowingUser makes user follow n threads, 100 roots a channel,
// as the gateway leaves them after a hydrate: a register read at 1 with a
// mention of 2 each, the memberships, and each thread's head at 2.
func setupFollowingUser(tb testing.TB, s Store, user string, n int) {
	tb.Helper()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	states := make([]thread.State, n)
	heads := make([]thread.Head, n)
	var regs []channel.Membership
	for i := range states {
		ref := thread.Ref{Channel: fmt.Sprintf("%s-ch-%03d", user, i/100), Root: int64(i%100 + 1)}
		if i%100 == 0 {
			regs = append(regs, channel.Join(receipt.Key{User: user, Channel: ref.Channel}, 1, now, 0))
		}
		states[i] = thread.State{Key: thread.Key{User: user, Ref: ref}, Cursors: receipt.State{Read: cursorAt(0, 1, "r1")},
			Follow: thread.Follow{Following: true, VersionUnixMs: now}, Mentions: []int64{2}}
		heads[i] = thread.Head{Ref: ref, Seq: 2, MessageID: "r2", UpdatedAtUnixMs: now + int64(i)}
	}
	require.NoError(tb, s.HydrateUser(ctx, user, states, redisstore.Incarnation{}))
	hydrateMemberships(tb, s, user, regs)
	_, err := s.RaiseHeads(ctx, heads)
	require.NoError(tb, err)
}

// BenchmarkFollowedThreads reads what a user's followed-threads list
// reads from Redis, for 1 and 1,000 threads: the registers with the
// memberships (one script), then the heads (one pipeline).
//
//	go test -run '^$' -bench FollowedThreads -benchmem ./pkg/kinds/threads/
func BenchmarkFollowedThreads(b *testing.B) {
	s := newThreadStore(b)
	ctx := context.Background()
	for _, n := range []int{1, 1000} {
		user := fmt.Sprintf("u%d", n)
		setupFollowingUser(b, s, user, n)
		b.Run(fmt.Sprintf("registers/threads=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := s.UserThreadsWithMemberships(ctx, user, "")
				if err != nil || len(r.States) != n || !r.Complete || !r.MembershipsComplete {
					b.Fatalf("%d registers, %v", len(r.States), err)
				}
			}
		})
		r, err := s.UserThreadsWithMemberships(ctx, user, "")
		require.NoError(b, err)
		refs := make([]thread.Ref, len(r.States))
		for i, st := range r.States {
			refs[i] = st.Key.Ref
		}
		b.Run(fmt.Sprintf("heads/threads=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				heads, err := s.HeadsAt(ctx, refs)
				if err != nil || len(heads) != n || heads[n-1].Seq != 2 {
					b.Fatalf("%d heads, %v", len(heads), err)
				}
			}
		})
	}
}
