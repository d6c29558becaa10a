package watch_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/views/readby"
	"github.com/readstate/receipts/pkg/watch"
)

// view writes the channel view the way the gateway's script does: the
// member's cursor in cv:{C}:cur and one stream entry per advance, in one
// transaction, the stream trimmed to maxLen exactly (tests make trimming
// deterministic; the gateway trims with ~).
type view struct {
	rdb    *redis.Client
	prefix string
	maxLen int64
	mu     sync.Mutex
	model  map[string]int64 // "channel/user/kind" → highest seq written
}

func newView(t *testing.T, maxLen int64) *view {
	rdb := redistest.Client(t)
	return &view{rdb: rdb, prefix: redistest.Prefix(t, rdb), maxLen: maxLen, model: map[string]int64{}}
}

func (v *view) mark(t *testing.T, ch, user string, kind receiptsv1.Kind, seq int64) {
	t.Helper()
	k := "r"
	if kind == receiptsv1.Kind_DELIVERED {
		k = "d"
	}
	ctx := context.Background()
	at := time.Now().UnixMilli()
	_, err := v.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, v.prefix+"cv:{"+ch+"}:cur", k+":"+user, fmt.Sprintf("0:%d:%d", seq, at))
		p.XAdd(ctx, &redis.XAddArgs{Stream: v.prefix + "cv:{" + ch + "}:s", MaxLen: v.maxLen,
			Values: []any{"u", user, "k", k, "e", "0", "s", strconv.FormatInt(seq, 10), "t", strconv.FormatInt(at, 10)}})
		return nil
	})
	require.NoError(t, err)
	v.mu.Lock()
	v.model[ch+"/"+user+"/"+kind.String()] = max(v.model[ch+"/"+user+"/"+kind.String()], seq)
	v.mu.Unlock()
}

func startHub(t *testing.T, v *view, cfg watch.Config) *watch.Hub {
	t.Helper()
	cfg.Redis, cfg.Keys = v.rdb, keysOf(v.rdb, v.prefix)
	if cfg.Coalesce == 0 {
		cfg.Coalesce = 20 * time.Millisecond
	}
	if cfg.Block == 0 {
		cfg.Block = 50 * time.Millisecond
	}
	h, err := watch.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool { return h.Ready(ctx) == nil }, 5*time.Second, 5*time.Millisecond)
	return h
}

// seen folds events into the highest position per key, checking that an
// event never carries two updates of one key.
type seen struct {
	highest map[string]int64
	token   string
	events  []*receiptsv1.WatchEvent
}

func (s *seen) add(t *testing.T, ev *receiptsv1.WatchEvent) {
	t.Helper()
	if s.highest == nil {
		s.highest = map[string]int64{}
	}
	s.events = append(s.events, ev)
	require.NotEmpty(t, ev.GetResumeToken(), "every event carries a token")
	s.token = ev.GetResumeToken()
	inEvent := map[string]bool{}
	for _, u := range ev.GetUpdates() {
		k := u.GetChannelId() + "/" + u.GetUserId() + "/" + u.GetKind().String()
		require.False(t, inEvent[k], "two updates of %s in one event", k)
		inEvent[k] = true
		s.highest[k] = max(s.highest[k], u.GetPosition().GetSeq())
	}
	for _, snap := range ev.GetSnapshot() {
		for _, m := range snap.GetMembers() {
			if m.GetRead() != nil {
				k := snap.GetChannelId() + "/" + m.GetUserId() + "/READ"
				s.highest[k] = max(s.highest[k], m.GetRead().GetSeq())
			}
			if m.GetDelivered() != nil {
				k := snap.GetChannelId() + "/" + m.GetUserId() + "/DELIVERED"
				s.highest[k] = max(s.highest[k], m.GetDelivered().GetSeq())
			}
		}
	}
}

// until reads events until the highest positions equal want.
func (s *seen) until(t *testing.T, sub *watch.Subscription, want map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !equal(s.highest, want) {
		ev, err := sub.Next(ctx)
		require.NoError(t, err, "waiting for %v, have %v", want, s.highest)
		s.add(t, ev)
	}
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func (v *view) want(channels ...string) map[string]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]int64{}
	for k, seq := range v.model {
		for _, ch := range channels {
			if len(k) > len(ch) && k[:len(ch)+1] == ch+"/" {
				out[k] = seq
			}
		}
	}
	return out
}

func TestFreshStreamSnapshotThenCoalescedUpdates(t *testing.T) {
	t.Parallel()
	v := newView(t, 10000)
	h := startHub(t, v, watch.Config{Coalesce: 100 * time.Millisecond})
	v.mark(t, "general", "alice", receiptsv1.Kind_READ, 3)
	v.mark(t, "general", "bob", receiptsv1.Kind_DELIVERED, 5)

	sub, err := h.Subscribe(context.Background(), []string{"general", "random", "general"}, "")
	require.NoError(t, err)
	defer sub.Close()
	require.Equal(t, []string{"general", "random"}, sub.Channels())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := sub.Next(ctx)
	require.NoError(t, err)
	require.False(t, first.GetResumeTokenExpired())
	require.Len(t, first.GetSnapshot(), 2, "a fresh stream starts with a snapshot of every channel")
	require.Empty(t, first.GetUpdates())
	var s seen
	s.add(t, first)
	require.Equal(t, v.want("general", "random"), s.highest)

	// 200 advances of 4 keys: far fewer updates arrive, each key at its
	// highest in the end.
	for seq := int64(1); seq <= 50; seq++ {
		v.mark(t, "general", "alice", receiptsv1.Kind_READ, 3+seq)
		v.mark(t, "general", "carol", receiptsv1.Kind_READ, seq)
		v.mark(t, "random", "alice", receiptsv1.Kind_DELIVERED, seq)
		v.mark(t, "elsewhere", "alice", receiptsv1.Kind_READ, seq) // not watched
	}
	s.until(t, sub, v.want("general", "random"))
	updates := 0
	for _, ev := range s.events[1:] {
		updates += len(ev.GetUpdates())
	}
	require.Less(t, updates, 150, "coalesced: one update per key per window, not one per entry")
}

func TestResumeAfterDisconnectHasNoGap(t *testing.T) {
	t.Parallel()
	v := newView(t, 10000)
	h := startHub(t, v, watch.Config{})
	sub, err := h.Subscribe(context.Background(), []string{"c1", "c2"}, "")
	require.NoError(t, err)
	var s seen
	for i := int64(1); i <= 10; i++ {
		v.mark(t, "c1", "u1", receiptsv1.Kind_READ, i)
	}
	s.until(t, sub, v.want("c1", "c2"))
	token := s.token
	sub.Close()

	// While disconnected: more advances, and a second subscriber keeps
	// the reader's position ahead of the token on this replica.
	other, err := h.Subscribe(context.Background(), []string{"c1"}, "")
	require.NoError(t, err)
	defer other.Close()
	for i := int64(11); i <= 30; i++ {
		v.mark(t, "c1", "u1", receiptsv1.Kind_READ, i)
		v.mark(t, "c2", "u2", receiptsv1.Kind_DELIVERED, i)
	}
	var o seen
	o.until(t, other, v.want("c1")) // the reader has read c1 past the token

	resumed, err := h.Subscribe(context.Background(), []string{"c1", "c2"}, token)
	require.NoError(t, err)
	defer resumed.Close()
	var r seen
	r.until(t, resumed, map[string]int64{"c1/u1/READ": 30, "c2/u2/DELIVERED": 30})
	for _, ev := range r.events {
		require.Empty(t, ev.GetSnapshot(), "a valid token resumes with updates, no snapshot")
		require.False(t, ev.GetResumeTokenExpired())
		for _, u := range ev.GetUpdates() {
			require.Greater(t, u.GetPosition().GetSeq(), int64(10), "nothing at or before the token again")
		}
	}
}

func TestTooOldTokenGetsExpiredAndSnapshot(t *testing.T) {
	t.Parallel()
	v := newView(t, 5) // streams keep 5 entries
	h := startHub(t, v, watch.Config{})
	sub, err := h.Subscribe(context.Background(), []string{"small", "quiet"}, "")
	require.NoError(t, err)
	var s seen
	v.mark(t, "small", "u1", receiptsv1.Kind_READ, 1)
	v.mark(t, "quiet", "u1", receiptsv1.Kind_READ, 1)
	s.until(t, sub, v.want("small", "quiet"))
	token := s.token
	sub.Close()
	for i := int64(2); i <= 20; i++ {
		v.mark(t, "small", fmt.Sprintf("u%d", i%7), receiptsv1.Kind_READ, i)
	}
	v.mark(t, "quiet", "u1", receiptsv1.Kind_READ, 2)

	resumed, err := h.Subscribe(context.Background(), []string{"small", "quiet"}, token)
	require.NoError(t, err)
	defer resumed.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := resumed.Next(ctx)
	require.NoError(t, err)
	require.True(t, first.GetResumeTokenExpired())
	require.Len(t, first.GetSnapshot(), 1, "only the trimmed channel is snapshotted")
	require.Equal(t, "small", first.GetSnapshot()[0].GetChannelId())
	var r seen
	r.add(t, first)
	r.until(t, resumed, v.want("small", "quiet")) // quiet resumes by update
}

func TestSlowSubscriberOverflowsToSnapshot(t *testing.T) {
	t.Parallel()
	v := newView(t, 10000)
	h := startHub(t, v, watch.Config{MaxPending: 3})
	// The ticks read (the gateway's GetTicks) completes every snapshot.
	var ticksCalls atomic.Int64
	h.SetTicks(func(_ context.Context, ch string) (*receiptsv1.ChannelTicks, error) {
		n := ticksCalls.Add(1)
		return &receiptsv1.ChannelTicks{ChannelId: ch, Head: &receiptsv1.Position{Seq: 100 + n}, DeliveredToAllUpTo: 10 * n, ReadByAllUpTo: n, MemberCount: 12, Detailed: true}, nil
	})
	slow, err := h.Subscribe(context.Background(), []string{"busy"}, "")
	require.NoError(t, err)
	defer slow.Close()
	fast, err := h.Subscribe(context.Background(), []string{"busy"}, "")
	require.NoError(t, err)
	defer fast.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opening, err := slow.Next(ctx) // the opening snapshot; then it stops reading
	require.NoError(t, err)
	require.Equal(t, int64(12), opening.GetSnapshot()[0].GetMemberCount())
	require.Positive(t, opening.GetSnapshot()[0].GetHead().GetSeq())

	var f seen
	for i := int64(1); i <= 10; i++ {
		v.mark(t, "busy", fmt.Sprintf("u%d", i), receiptsv1.Kind_READ, i)
		// The fast one keeps up while the slow one does not read.
		f.until(t, fast, v.want("busy"))
	}
	ev, err := slow.Next(ctx)
	require.NoError(t, err)
	require.True(t, ev.GetResumeTokenExpired(), "an overflowed subscriber gets expired + snapshot")
	var s seen
	s.add(t, ev)
	require.Equal(t, v.want("busy"), s.highest)
	// The overflow's snapshot is completed by a fresh ticks read (the
	// third: after both subscribers' opening ones).
	snap := ev.GetSnapshot()[0]
	require.Equal(t, int64(103), snap.GetHead().GetSeq())
	require.Equal(t, int64(30), snap.GetDeliveredToAllUpTo())
	require.Equal(t, int64(3), snap.GetReadByAllUpTo())
	require.Equal(t, int64(12), snap.GetMemberCount())
	require.True(t, snap.GetDetailed())
}

// A large channel's snapshot (the ticks read says not detailed) carries
// its watermarks, not every member's cursors; a failing ticks read fails
// the subscription (the client retries) instead of a snapshot without
// watermarks.
func TestSnapshotOfALargeChannelAndATicksFailure(t *testing.T) {
	t.Parallel()
	v := newView(t, 10000)
	h := startHub(t, v, watch.Config{})
	v.mark(t, "big", "u1", receiptsv1.Kind_READ, 4)
	var fail atomic.Bool
	h.SetTicks(func(_ context.Context, ch string) (*receiptsv1.ChannelTicks, error) {
		if fail.Load() {
			return nil, errors.New("redis down")
		}
		return &receiptsv1.ChannelTicks{ChannelId: ch, Head: &receiptsv1.Position{Seq: 9}, DeliveredToAllUpTo: 4, ReadByAllUpTo: 3, MemberCount: 5000}, nil
	})
	sub, err := h.Subscribe(context.Background(), []string{"big"}, "")
	require.NoError(t, err)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	snap := ev.GetSnapshot()[0]
	require.False(t, snap.GetDetailed())
	require.Empty(t, snap.GetMembers(), "a large channel's ticks are its watermarks")
	require.Equal(t, int64(9), snap.GetHead().GetSeq())
	require.Equal(t, int64(3), snap.GetReadByAllUpTo())

	fail.Store(true)
	_, err = h.Subscribe(context.Background(), []string{"big"}, "")
	require.ErrorContains(t, err, "redis down")
}

func TestSubscribeRefusals(t *testing.T) {
	t.Parallel()
	v := newView(t, 100)
	h := startHub(t, v, watch.Config{MaxChannels: 3, MaxSubscribers: 1})
	ctx := context.Background()
	_, err := h.Subscribe(ctx, []string{"a"}, "garbage!")
	require.ErrorIs(t, err, watch.ErrBadToken)
	_, err = h.Subscribe(ctx, nil, "")
	require.ErrorIs(t, err, watch.ErrNoChannels)
	_, err = h.Subscribe(ctx, []string{"a", "b", "c", "d"}, "")
	require.ErrorIs(t, err, watch.ErrTooManyChannels)
	sub, err := h.Subscribe(ctx, []string{"a"}, "")
	require.NoError(t, err)
	_, err = h.Subscribe(ctx, []string{"a"}, "")
	require.ErrorIs(t, err, watch.ErrTooManySubscribers)
	sub.Close()
	sub.Close() // idempotent
	sub, err = h.Subscribe(ctx, []string{"a"}, "")
	require.NoError(t, err, "a closed subscription frees its place")
	sub.Close()
}

func TestStopEndsSubscriptions(t *testing.T) {
	t.Parallel()
	v := newView(t, 100)
	h, err := watch.New(watch.Config{Redis: v.rdb, Keys: keysOf(v.rdb, v.prefix), Block: 20 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	require.Eventually(t, func() bool { return h.Ready(ctx) == nil }, 5*time.Second, 5*time.Millisecond)
	sub, err := h.Subscribe(context.Background(), []string{"a"}, "")
	require.NoError(t, err)
	_, err = sub.Next(context.Background())
	require.NoError(t, err)
	cancel()
	require.NoError(t, <-done)
	_, err = sub.Next(context.Background())
	require.True(t, errors.Is(err, watch.ErrClosed), "%v", err)
}

// remove takes a member's cursor out of the view and streams a removal,
// as the read-by view's Remove script does (a leave, a kind no longer
// shared, an erasure).
func (v *view) remove(t *testing.T, ch, user string, kind receiptsv1.Kind) {
	t.Helper()
	k := "r"
	if kind == receiptsv1.Kind_DELIVERED {
		k = "d"
	}
	ctx := context.Background()
	_, err := v.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, v.prefix+"cv:{"+ch+"}:cur", k+":"+user)
		p.XAdd(ctx, &redis.XAddArgs{Stream: v.prefix + "cv:{" + ch + "}:s",
			Values: []any{"u", user, "k", k, "rm", "1", "t", strconv.FormatInt(time.Now().UnixMilli(), 10)}})
		return nil
	})
	require.NoError(t, err)
	v.mu.Lock()
	delete(v.model, ch+"/"+user+"/"+kind.String())
	v.mu.Unlock()
}

// shown folds events as a watcher shows them: a removal forgets the key,
// a snapshot replaces its channel.
type shown struct {
	token   string
	state   map[string]int64
	removed map[string]bool // keys some event removed
}

func (s *shown) add(t *testing.T, ev *receiptsv1.WatchEvent) {
	t.Helper()
	if s.state == nil {
		s.state, s.removed = map[string]int64{}, map[string]bool{}
	}
	s.token = ev.GetResumeToken()
	for _, u := range ev.GetUpdates() {
		k := u.GetChannelId() + "/" + u.GetUserId() + "/" + u.GetKind().String()
		if u.GetRemoved() {
			require.Nil(t, u.GetPosition(), "a removal carries no position")
			delete(s.state, k)
			s.removed[k] = true
			continue
		}
		s.state[k] = max(s.state[k], u.GetPosition().GetSeq())
	}
	var r seen
	r.add(t, &receiptsv1.WatchEvent{ResumeToken: ev.GetResumeToken(), Snapshot: ev.GetSnapshot()})
	for k, v := range r.highest {
		s.state[k] = v
	}
}

func (s *shown) until(t *testing.T, sub *watch.Subscription, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !done() {
		ev, err := sub.Next(ctx)
		require.NoError(t, err, "have %v", s.state)
		s.add(t, ev)
	}
}

// A member's cursor leaving the view reaches watchers as a removal: live,
// coalesced with the moves around it by stream order (a removal after a
// move wins, a move after a removal brings the key back), and on resume.
func TestRemovalsReachWatchers(t *testing.T) {
	t.Parallel()
	v := newView(t, 10000)
	h := startHub(t, v, watch.Config{})
	v.mark(t, "c", "a", receiptsv1.Kind_READ, 5)
	v.mark(t, "c", "b", receiptsv1.Kind_READ, 3)
	sub, err := h.Subscribe(context.Background(), []string{"c"}, "")
	require.NoError(t, err)
	var live shown
	live.until(t, sub, func() bool { return equal(live.state, v.want("c")) })

	// Live: a's read leaves the view.
	v.remove(t, "c", "a", receiptsv1.Kind_READ)
	live.until(t, sub, func() bool { return live.removed["c/a/READ"] })
	require.Equal(t, v.want("c"), live.state)
	sub.Close()

	// Resumed: after the token, b moves then leaves (coalesced to a
	// removal), a comes back (removal then move: an update).
	token := live.token
	v.mark(t, "c", "b", receiptsv1.Kind_READ, 8)
	v.remove(t, "c", "b", receiptsv1.Kind_READ)
	v.mark(t, "c", "a", receiptsv1.Kind_READ, 2)
	resumed, err := h.Subscribe(context.Background(), []string{"c"}, token)
	require.NoError(t, err)
	defer resumed.Close()
	again := shown{state: map[string]int64{"c/b/READ": 3}, removed: map[string]bool{}}
	again.until(t, resumed, func() bool { return equal(again.state, v.want("c")) })
	require.True(t, again.removed["c/b/READ"], "b's removal reached the resumed watcher")
	require.Equal(t, map[string]int64{"c/a/READ": 2}, again.state)
}

// TestLargeChannelSnapshotReadsNoMembers: a channel whose view holds more
// than SnapshotMembers members gets a snapshot without members even when
// no ticks function says it is large (its cursors hash is never read),
// and a small one lists them.
func TestLargeChannelSnapshotReadsNoMembers(t *testing.T) {
	t.Parallel()
	v := newView(t, 10000)
	h := startHub(t, v, watch.Config{SnapshotMembers: 2})
	// Five cursors: more than two members' worth (two kinds each).
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5"} {
		v.mark(t, "big", u, receiptsv1.Kind_READ, 4)
	}
	v.mark(t, "small", "u1", receiptsv1.Kind_READ, 4)
	v.mark(t, "small", "u2", receiptsv1.Kind_DELIVERED, 4)
	sub, err := h.Subscribe(context.Background(), []string{"big", "small"}, "")
	require.NoError(t, err)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	big, small := ev.GetSnapshot()[0], ev.GetSnapshot()[1]
	require.False(t, big.GetDetailed())
	require.Empty(t, big.GetMembers())
	require.True(t, small.GetDetailed())
	require.Len(t, small.GetMembers(), 2)

	h.SetSnapshotMembers(3)
	sub2, err := h.Subscribe(context.Background(), []string{"big"}, "")
	require.NoError(t, err)
	defer sub2.Close()
	ev, err = sub2.Next(ctx)
	require.NoError(t, err)
	require.Len(t, ev.GetSnapshot()[0].GetMembers(), 5, "the gateway's threshold applies")
}

func TestStreamsPerClient(t *testing.T) {
	t.Parallel()
	v := newView(t, 100)
	h := startHub(t, v, watch.Config{MaxStreamsPerClient: 2})
	ctx := context.Background()
	a1, err := h.SubscribeAs(ctx, "token:a", []string{"x"}, "")
	require.NoError(t, err)
	_, err = h.SubscribeAs(ctx, "token:a", []string{"y"}, "")
	require.NoError(t, err)
	_, err = h.SubscribeAs(ctx, "token:a", []string{"z"}, "")
	require.ErrorIs(t, err, watch.ErrTooManyClientStreams)
	b, err := h.SubscribeAs(ctx, "token:b", []string{"x"}, "")
	require.NoError(t, err, "another client has its own bound")
	b.Close()
	_, err = h.Subscribe(ctx, []string{"x"}, "")
	require.NoError(t, err, "an unnamed caller is not bounded per client")
	a1.Close()
	a1.Close()
	_, err = h.SubscribeAs(ctx, "token:a", []string{"z"}, "")
	require.NoError(t, err, "a closed stream frees its place, once")
	_, err = h.SubscribeAs(ctx, "token:a", []string{"z"}, "")
	require.ErrorIs(t, err, watch.ErrTooManyClientStreams)
}

// keysOf is the read-by view's keys under prefix, which the hub reads.
func keysOf(rdb redis.UniversalClient, prefix string) watch.Keys {
	return readby.NewStore(nil, redisstore.New(rdb, redisstore.Config{Prefix: prefix}))
}
