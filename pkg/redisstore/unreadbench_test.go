package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redistest"
)

// setupUnreadUser puts user in n channels as the gateway leaves them after
// a hydrate: cursors (read at 5), registers, 2 mentions (seqs 7 and 9) per
// channel, and each channel's head at 10.
func setupUnreadUser(tb testing.TB, s *Store, user string, n int) []string {
	tb.Helper()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	channels := make([]string, n)
	states := make([]receipt.State, n)
	regs := make([]channel.Membership, n)
	mentions := make([]channel.Mentions, n)
	heads := make([]channel.Head, n)
	for i := range channels {
		ch := fmt.Sprintf("%s-ch-%05d", user, i)
		channels[i] = ch
		k := receipt.Key{User: user, Channel: ch}
		states[i] = receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 5}, MessageID: "m5"}, UpdatedAtUnixMs: now}
		regs[i] = channel.Join(k, 1, now, 0)
		mentions[i] = channel.Mentions{Key: k, Seqs: []int64{7, 9}}
		heads[i] = channel.Head{Channel: ch, Seq: 10, MessageID: "m10", UpdatedAtUnixMs: now}
	}
	require.NoError(tb, s.Hydrate(ctx, user, states, Incarnation{}))
	HydrateMembershipsAndMentions(tb, s, user, regs, channel.MentionCapDefault, mentions...)
	for start := 0; start < n; start += 1000 {
		_, err := s.RaiseHeads(ctx, heads[start:min(start+1000, n)])
		require.NoError(tb, err)
		putDeletions(tb, s, nil, channels[start:min(start+1000, n)]...)
	}
	return channels
}

// BenchmarkUnread reads one user's counts across 1, 1,000 and 10,000
// channels from Redis (the default set: every channel of the user; and
// the 1,000 listed), as GetUnread does:
//
//	go test -run '^$' -bench Unread -benchmem ./pkg/redisstore/
func BenchmarkUnread(b *testing.B) {
	rdb := redistest.Client(b)
	s := New(rdb, Config{Prefix: redistest.Prefix(b, rdb)})
	ctx := context.Background()
	for _, n := range []int{1, 1000, 10000} {
		user := fmt.Sprintf("u%d", n)
		channels := setupUnreadUser(b, s, user, n)
		b.Run(fmt.Sprintf("default/channels=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := s.Unread(ctx, user, nil, channel.MentionCapDefault)
				if err != nil || len(v.Channels) != n {
					b.Fatalf("%d channels, %v", len(v.Channels), err)
				}
			}
		})
		if n <= 1000 {
			b.Run(fmt.Sprintf("listed/channels=%d", n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					v, err := s.Unread(ctx, user, channels, channel.MentionCapDefault)
					if err != nil || len(v.Channels) != n {
						b.Fatalf("%d channels, %v", len(v.Channels), err)
					}
				}
			})
		}
	}
}

// TestUnreadCounts holds the counts BenchmarkUnread reads to what the
// setup wrote.
func TestUnreadCounts(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	s := New(rdb, Config{Prefix: redistest.Prefix(t, rdb)})
	channels := setupUnreadUser(t, s, "u", 1200)
	for _, listed := range [][]string{nil, channels[:3]} {
		v, err := s.Unread(context.Background(), "u", listed, channel.MentionCapDefault)
		require.NoError(t, err)
		require.True(t, v.CursorsComplete && v.MembershipsComplete)
		require.Empty(t, v.MissingHeads)
		if listed == nil {
			require.Len(t, v.Channels, 1200)
		} else {
			require.Len(t, v.Channels, 3)
		}
		for _, cv := range v.Channels {
			require.Equal(t, int64(5), cv.Unread, cv.Channel)
			require.Equal(t, int64(6), cv.FirstUnread)
			require.Equal(t, int64(2), cv.Mentions)
			require.Equal(t, int64(10), cv.Head.Seq)
			require.True(t, cv.HasState && cv.HasMembership && cv.Membership.Member)
		}
	}
}
