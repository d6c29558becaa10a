package unread

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkUnread reads one user's counts across 1, 1,000 and 10,000
// channels from Redis (the default set: every channel of the user; and
// the 1,000 listed), as GetUnread does:
//
//	go test -run '^$' -bench Unread -benchmem ./pkg/views/unread/
func BenchmarkUnread(b *testing.B) {
	s, rs, _ := newTestStore(b)
	ctx := context.Background()
	for _, n := range []int{1, 1000, 10000} {
		user := fmt.Sprintf("u%d", n)
		channels := setupUnreadUser(b, rs, user, n)
		b.Run(fmt.Sprintf("default/channels=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := s.Read(ctx, user, nil)
				if err != nil || len(v.Channels) != n {
					b.Fatalf("%d channels, %v", len(v.Channels), err)
				}
			}
		})
		if n <= 1000 {
			b.Run(fmt.Sprintf("listed/channels=%d", n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					v, err := s.Read(ctx, user, channels)
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
	s, rs, _ := newTestStore(t)
	channels := setupUnreadUser(t, rs, "u", 1200)
	for _, listed := range [][]string{nil, channels[:3]} {
		v, err := s.Read(context.Background(), "u", listed)
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
