package cursors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
)

// TestMemoryPerChannelState measures Redis bytes per (user, channel)
// with and without the channel state, with MEMORY USAGE (every field) over
// every key of a sample under the test's prefix:
//
//	RECEIPTS_MEMBENCH=1 go test -run TestMemoryPerChannelState -v ./pkg/redisstore/
//
// Sample: 2,000 users × 10 channels each out of 1,000 channels (about 20
// members per channel). "Before" is the cursors alone (the user hashes,
// what the store held before channels); "after" adds, per pair, the
// membership register in the user's and the channel's hash (as the
// members kind lays them out: PutMemberships), 3 mentions,
// a private read for one pair in four, and each channel's head.
// Results: BENCHMARKS.md, "Channels and counts".
func TestMemoryPerChannelState(t *testing.T) {
	if os.Getenv("RECEIPTS_MEMBENCH") == "" {
		t.Skip("set RECEIPTS_MEMBENCH=1 to measure Redis memory per (user, channel)")
	}
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := NewStore(redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)}))
	const users, perUser, channels = 2000, 10, 1000
	rng := rand.New(rand.NewPCG(1, 2))
	var keys []receipt.Key
	for u := range users {
		seen := map[int]bool{}
		for len(seen) < perUser {
			seen[rng.IntN(channels)] = true
		}
		for c := range seen {
			keys = append(keys, receipt.Key{User: fmt.Sprintf("user-%06d", u), Channel: fmt.Sprintf("channel-%05d", c)})
		}
	}
	bytesOf := func(pattern string) (int64, int) {
		var total int64
		var n int
		iter := rdb.Scan(ctx, 0, s.redis.Prefix()+pattern, 1000).Iterator()
		for iter.Next(ctx) {
			used, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
			require.NoError(t, err)
			total += used
			n++
		}
		require.NoError(t, iter.Err())
		return total, n
	}

	for start := 0; start < len(keys); start += 500 {
		var states []receipt.State
		for _, k := range keys[start:min(start+500, len(keys))] {
			seq := 1000 + rng.Int64N(100000)
			c := receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: fmt.Sprintf("m%d", seq)}
			states = append(states, receipt.State{Key: k, Read: c, Delivered: c, DeviceID: "phone", UpdatedAtUnixMs: 1763900000000})
		}
		res, err := s.Merge(ctx, states)
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}
	before, nBefore := bytesOf("*")
	t.Logf("before: %d bytes in %d keys for %d (user, channel) pairs: %.1f bytes/pair", before, nBefore, len(keys), float64(before)/float64(len(keys)))

	for start := 0; start < len(keys); start += 500 {
		part := keys[start:min(start+500, len(keys))]
		var regs []channel.Membership
		var ms []channel.Mentions
		var private []receipt.State
		for i, k := range part {
			regs = append(regs, channel.Join(k, 900+int64(i), 1763900000000+int64(i), 900))
			base := 200000 + rng.Int64N(1000)
			ms = append(ms, channel.Mentions{Key: k, Seqs: []int64{base, base + 7, base + 19}})
			if i%4 == 0 {
				private = append(private, receipt.State{Key: k, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 150000}}})
			}
		}
		PutMemberships(t, s, regs...)
		PutMentions(t, s, channel.MentionCapDefault, ms...)
		mr, err := s.Merge(ctx, private)
		require.NoError(t, err)
		for _, r := range mr {
			require.NoError(t, r.Err)
		}
	}
	var heads []channel.Head
	for c := range channels {
		heads = append(heads, channel.Head{Channel: fmt.Sprintf("channel-%05d", c), Seq: 250000, MessageID: "m250000", UpdatedAtUnixMs: 1763900000000})
	}
	PutHeads(t, s, heads...)
	after, nAfter := bytesOf("*")
	t.Logf("after: %d bytes in %d keys: %.1f bytes/pair (%.2f× before)", after, nAfter, float64(after)/float64(len(keys)), float64(after)/float64(before))
	for _, kind := range []string{"u:", "um:", "cm:", "hd:", "mh:"} {
		b, n := bytesOf(kind + "*")
		t.Logf("  %-4s %9d bytes in %6d keys: %6.1f bytes/pair", strings.TrimSuffix(kind, ":"), b, n, float64(b)/float64(len(keys)))
	}
	require.Greater(t, after, before)
}
