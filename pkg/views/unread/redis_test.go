package unread

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// countingHook counts the round trips (commands and pipelines) to Redis.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// One user's unread state across 1,000 channels takes one round trip for
// listed channels and three for the default set; the counts are the domain's.
func TestUnreadBulkRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, s, _ := newTestStore(t)
	const user, capN, nch = "reader", 2, 1000
	var states []receipt.State
	var heads []channel.Head
	var regs []channel.Membership
	var ms []channel.Mentions
	var listed []string
	for i := range nch {
		ch := "ch" + strconv.Itoa(i)
		listed = append(listed, ch)
		k := receipt.Key{User: user, Channel: ch}
		heads = append(heads, channel.Head{Channel: ch, Seq: int64(10 + i%7)})
		if i%3 != 0 {
			states = append(states, receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: int64(i % 5)}, MessageID: "m"}, DeviceID: "d", UpdatedAtUnixMs: 1})
		}
		if i%4 == 0 {
			states = append(states, receipt.State{Key: k, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: 6}}})
		}
		regs = append(regs, channel.Membership{Key: k, Member: i%10 != 9, VersionSeq: 1, VersionUnixMs: 1})
		ms = append(ms, channel.Mentions{Key: k, Seqs: []int64{2, 5, 7, 9}})
	}
	_, err := cursors.NewStore(s).Merge(ctx, states)
	require.NoError(t, err)
	_, err = headkind.NewStore(nil, s).RaiseRedis(ctx, heads[:nch-1]) // the last head is unknown to Redis
	require.NoError(t, err)
	_, err = members.NewStore(nil, s).MergeMemberships(ctx, regs)
	require.NoError(t, err)
	require.NoError(t, mentions.NewStore(nil, s).WithMentionCap(capN).AddRedis(ctx, ms))

	hook := &countingHook{}
	rdb := s.Client().(*redis.Client).WithTimeout(0)
	rdb.AddHook(hook)
	counted := NewStore(nil, redisstore.New(rdb, redisstore.Config{Prefix: s.Prefix()})).WithMentionCap(capN)
	view, err := counted.Read(ctx, user, listed)
	require.NoError(t, err)
	require.EqualValues(t, 1, hook.n.Load(), "listed channels: one round trip (cursors, registers, mentions and heads)")
	require.Len(t, view.Channels, nch)
	require.False(t, view.CursorsComplete)
	require.False(t, view.MembershipsComplete)
	require.Equal(t, []string{"ch999"}, view.MissingHeads)

	model := map[string]receipt.State{}
	for _, st := range states {
		model[st.Key.Channel], _ = receipt.Merge(model[st.Key.Channel], st)
	}
	require.True(t, slices.IsSortedFunc(view.Channels, func(a, b ChannelView) int { return strings.Compare(a.Channel, b.Channel) }),
		"in channel order")
	for _, cv := range view.Channels {
		ch := cv.Channel
		i, err := strconv.Atoi(strings.TrimPrefix(ch, "ch"))
		require.NoError(t, err)
		st := model[ch]
		require.Equal(t, st.EffectiveRead(), cv.State.EffectiveRead(), ch)
		if !cv.HeadKnown {
			continue
		}
		wantUnread, wantFirst := channel.Unread(int64(10+i%7), st)
		require.Equal(t, wantUnread, cv.Unread, ch)
		require.Equal(t, wantFirst, cv.FirstUnread, ch)
		n, capped := channel.MentionCount(channel.Retain([]int64{2, 5, 7, 9}, capN), st.EffectiveRead().Seq, capN)
		require.Equal(t, n, cv.Mentions, ch)
		require.Equal(t, capped, cv.MentionsCapped, ch)
		require.Equal(t, i%10 != 9, cv.Membership.Member)
	}

	hook.n.Store(0)
	view, err = counted.Read(ctx, user, nil)
	require.NoError(t, err)
	require.EqualValues(t, 3, hook.n.Load(), "the default set: three round trips (the hashes' sizes, the hashes, the heads)")
	require.Len(t, view.Channels, nch-nch/10, "left channels do not count")

	// Hydrated: complete, and a channel known to have no head has seq 0.
	require.NoError(t, cursors.NewStore(s).Hydrate(ctx, user, nil, redisstore.Incarnation{}))
	require.NoError(t, mentions.NewStore(nil, s).HydrateRedis(ctx, user, nil))
	require.NoError(t, members.NewStore(nil, s).HydrateMemberships(ctx, user, nil))
	require.NoError(t, headkind.NewStore(nil, s).HydrateRedis(ctx, nil, []string{"ch999"}))
	view, err = counted.Read(ctx, user, []string{"ch999", "nowhere"})
	require.NoError(t, err)
	require.True(t, view.CursorsComplete)
	require.True(t, view.MembershipsComplete)
	require.Equal(t, []string{"nowhere"}, view.MissingHeads)
	require.True(t, view.Channels[0].HeadKnown)
	require.Zero(t, view.Channels[0].Head.Seq)
	require.Zero(t, view.Channels[0].Unread)
}

// TestSeqsAbove holds appendSeqsAbove to the domain: the seqs of a stored
// mention list above every bound, below, inside and above the list.
func TestSeqsAbove(t *testing.T) {
	t.Parallel()
	seqs := []int64{3, 61, 62, 1 << 40}
	var stored []string
	for _, q := range seqs {
		stored = append(stored, redisstore.PadSeq(q))
	}
	v := strings.Join(stored, " ")
	for _, read := range []int64{0, 2, 3, 60, 61, 62, 63, 1<<40 - 1, 1 << 40, 1<<62 + 5} {
		var want []int64
		for _, q := range seqs {
			if q > read {
				want = append(want, q)
			}
		}
		got, err := appendSeqsAbove(nil, v, []byte(redisstore.PadSeq(read)))
		require.NoError(t, err)
		require.Equal(t, want, got, "read %d", read)
	}
	got, err := appendSeqsAbove(nil, "", []byte(redisstore.PadSeq(0)))
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = appendSeqsAbove(nil, redisstore.PadSeq(3)+" zz", []byte(redisstore.PadSeq(0)))
	require.Error(t, err, "an undecodable member above the read")
}

// TestUndecodableFieldSkipped: a stored cursor Go cannot decode (an epoch
// past int64, which an unbounded mark-unread used to write) reads as no
// state and is counted, never failing the user's read; the other
// channels read as ever.
func TestUndecodableFieldSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, s, rdb := newTestStore(t)
	bad := prometheus.NewCounter(prometheus.CounterOpts{Name: "undecodable"})
	counted := redisstore.New(rdb, redisstore.Config{Prefix: s.Prefix(), Undecodable: bad})
	st := receipt.State{Key: receipt.Key{User: "u", Channel: "good"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 7}, MessageID: "m7"}, UpdatedAtUnixMs: 1}
	require.NoError(t, cursors.NewStore(s).Hydrate(ctx, "u", []receipt.State{st}, redisstore.Incarnation{}))
	require.NoError(t, rdb.HSet(ctx, cursors.NewStore(s).RedisKey("u"), "bad", "zzzzzzzzzzzz.5 m5 d 0").Err())
	view, err := NewStore(nil, counted).Read(ctx, "u", []string{"bad", "good"})
	require.NoError(t, err)
	require.Len(t, view.Channels, 2)
	require.False(t, view.Channels[0].HasState, "the undecodable field reads as no state")
	require.True(t, view.Channels[1].HasState)
	require.Equal(t, int64(7), view.Channels[1].State.EffectiveRead().Seq)
	require.Equal(t, 1.0, testutil.ToFloat64(bad))
}
