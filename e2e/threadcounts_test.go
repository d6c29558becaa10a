package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

// threadModel is the reference model of thread counts, from acknowledged
// operations only. A user's own thread cursors move only by that user's
// client, in order; replies (heads, mentions, follows) are merges. Follows
// only grow here (no unfollow, no leave: their versions are the
// gateway's clock, which a model of acknowledgements cannot order; the
// gateway tests cover them), so the model is exact.
type threadModel struct {
	mu    sync.Mutex
	heads map[thread.Ref]int64
	keys  map[thread.Key]*modelKey // read, private, mentions; member = follows
	// delivered: the greatest seq a user replied at or publicly read
	// (reading implies delivery; a private read and mark-unread move none).
	delivered map[thread.Key]int64
	// deleted are the acknowledged reply deletions of each thread.
	deleted map[thread.Ref]map[int64]bool
	ops     int
}

func (m *threadModel) deliver(k thread.Key, seq int64) {
	if m.delivered == nil {
		m.delivered = map[thread.Key]int64{}
	}
	m.delivered[k] = max(m.delivered[k], seq)
}

func (m *threadModel) key(k thread.Key) *modelKey {
	mk := m.keys[k]
	if mk == nil {
		mk = &modelKey{mentions: map[int64]bool{}}
		m.keys[k] = mk
	}
	return mk
}

// counts is (unread, mentions above the effective read) of a thread.
func (m *threadModel) counts(k thread.Key) (unread, mentions int64) {
	mk := m.key(k)
	eff := mk.effective().Seq
	if h := m.heads[k.Ref]; h > eff {
		unread = h - eff
		for s := range m.deleted[k.Ref] {
			if s > eff && s <= h {
				unread--
			}
		}
		for s := range mk.mentions {
			if s > eff && !m.deleted[k.Ref][s] {
				mentions++
			}
		}
	}
	return unread, mentions
}

type threadWorkload struct {
	cl     receiptsv1connect.ReceiptServiceClient
	rng    *rand.Rand
	users  []string // owned
	all    []string
	refs   []thread.Ref
	seqs   map[thread.Ref]*atomic.Int64
	m      *threadModel
	errs   *atomic.Int64
	held   []*receiptsv1.NotifyThreadReplyRequest
	errLog func(error)
}

func (w *threadWorkload) failed(err error, expected ...apierr.Reason) {
	for _, r := range expected {
		if apierr.ReasonOf(err) == r {
			return
		}
	}
	w.errs.Add(1)
	w.errLog(err)
}

func (w *threadWorkload) reply(ctx context.Context, req *receiptsv1.NotifyThreadReplyRequest) {
	for range 1 + boolInt(w.rng.Float64() < 0.15) { // sometimes a duplicate
		res, err := w.cl.NotifyThreadReply(ctx, connect.NewRequest(req))
		if err != nil {
			w.failed(err)
			return
		}
		ref := thread.Ref{Channel: req.ChannelId, Root: req.RootSeq}
		w.m.mu.Lock()
		w.m.ops++
		w.m.heads[ref] = max(w.m.heads[ref], req.Seq)
		mk := w.m.key(thread.Key{User: req.SenderId, Ref: ref})
		mk.raiseRead(mk.at(req.Seq))
		mk.member = true
		w.m.deliver(thread.Key{User: req.SenderId, Ref: ref}, req.Seq)
		for _, u := range res.Msg.GetResult().GetMentioned() {
			mu := w.m.key(thread.Key{User: u, Ref: ref})
			mu.mentions[req.Seq], mu.member = true, true
		}
		w.m.mu.Unlock()
	}
}

func (w *threadWorkload) step(ctx context.Context) {
	u := w.users[w.rng.IntN(len(w.users))]
	ref := w.refs[w.rng.IntN(len(w.refs))]
	k := thread.Key{User: u, Ref: ref}
	w.m.mu.Lock()
	head := w.m.heads[ref]
	w.m.mu.Unlock()
	switch r := w.rng.Float64(); {
	case r < 0.40: // a reply, sometimes held back and posted later
		req := &receiptsv1.NotifyThreadReplyRequest{ChannelId: ref.Channel, RootSeq: ref.Root, Seq: w.seqs[ref].Add(1), SenderId: u}
		req.MessageId = fmt.Sprintf("r%d", req.Seq)
		for range w.rng.IntN(3) {
			req.Mentions = append(req.Mentions, w.all[w.rng.IntN(len(w.all))])
		}
		if w.rng.Float64() < 0.2 {
			w.held = append(w.held, req)
			return
		}
		w.reply(ctx, req)
		if len(w.held) > 0 && w.rng.Float64() < 0.5 {
			h := w.held[0]
			w.held = w.held[1:]
			w.reply(ctx, h)
		}
	case r < 0.70 && head > 0: // a public or private thread read
		seq := 1 + w.rng.Int64N(head)
		private := w.rng.Float64() < 0.3
		if _, err := w.cl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: u, ChannelId: ref.Channel, RootSeq: ref.Root, Seq: seq, Private: private})); err != nil {
			w.failed(err)
			return
		}
		w.m.mu.Lock()
		w.m.ops++
		mk := w.m.key(k)
		if private {
			mk.raisePrivate(mk.at(seq))
		} else {
			mk.raiseRead(mk.at(seq))
			w.m.deliver(k, seq)
		}
		w.m.mu.Unlock()
	case r < 0.80 && head > 0: // mark unread: the own position only, at the next epoch
		seq := 1 + w.rng.Int64N(head)
		res, err := w.cl.MarkThreadUnread(ctx, connect.NewRequest(&receiptsv1.MarkThreadUnreadRequest{UserId: u, ChannelId: ref.Channel, RootSeq: ref.Root, Seq: seq}))
		if err != nil {
			w.failed(err)
			return
		}
		w.m.mu.Lock()
		w.m.ops++
		mk := w.m.key(k)
		mk.private = receipt.Position{Epoch: mk.epoch() + 1, Seq: seq - 1}
		mk.hasCursor = true
		w.m.mu.Unlock()
		if w.rng.Float64() < 0.15 {
			// The retry with the epoch answered changes nothing.
			e := res.Msg.GetEpoch()
			again, err := w.cl.MarkThreadUnread(ctx, connect.NewRequest(&receiptsv1.MarkThreadUnreadRequest{UserId: u, ChannelId: ref.Channel, RootSeq: ref.Root, Seq: seq, Epoch: &e}))
			if err != nil {
				w.failed(err)
				return
			}
			if again.Msg.GetAdvanced() {
				w.failed(fmt.Errorf("a retried thread mark-unread of %v moved something", k))
			}
		}
	case r < 0.85 && w.seqs[ref].Load() > 0: // delete a reply, sometimes one not notified yet; over the route or the batch form
		seq := 1 + w.rng.Int64N(w.seqs[ref].Load())
		var err error
		if w.rng.Float64() < 0.5 {
			_, err = w.cl.DeleteThreadReply(ctx, connect.NewRequest(&receiptsv1.DeleteThreadReplyRequest{ChannelId: ref.Channel, RootSeq: ref.Root, Seq: seq}))
		} else {
			_, err = w.cl.NotifyMessages(ctx, connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
				{ChannelId: ref.Channel, ThreadRootSeq: ref.Root, Seq: seq, Deleted: true}}}))
		}
		if err != nil {
			w.failed(err)
			return
		}
		w.m.mu.Lock()
		w.m.ops++
		if w.m.deleted == nil {
			w.m.deleted = map[thread.Ref]map[int64]bool{}
		}
		if w.m.deleted[ref] == nil {
			w.m.deleted[ref] = map[int64]bool{}
		}
		w.m.deleted[ref][seq] = true
		w.m.mu.Unlock()
	case r < 0.90: // follow
		if _, err := w.cl.FollowThread(ctx, connect.NewRequest(&receiptsv1.FollowThreadRequest{UserId: u, ChannelId: ref.Channel, RootSeq: ref.Root})); err != nil {
			w.failed(err)
			return
		}
		w.m.mu.Lock()
		w.m.ops++
		w.m.key(k).member = true
		w.m.mu.Unlock()
	default: // a stale ack of an older epoch changes nothing
		w.m.mu.Lock()
		e := w.m.key(k).epoch()
		w.m.mu.Unlock()
		if e == 0 || head == 0 {
			return
		}
		old := e - 1
		res, err := w.cl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: u, ChannelId: ref.Channel, RootSeq: ref.Root, Seq: head, Epoch: &old}))
		if err != nil {
			w.failed(err)
		} else if res.Msg.GetAdvanced() {
			w.errs.Add(1)
			w.errLog(fmt.Errorf("a stale thread ack advanced %v", k))
		}
	}
}

// TestThreadCountsMatchModel drives thread replies (mentions, duplicates,
// reordering), public and private thread reads, mark-unread, deleted
// replies (some before their notice), follows and stale acks from concurrent clients (gRPC and Connect JSON), then checks
// every user's followed threads (ListThreads) and GetUnread's thread
// counts against the model: from Redis, after the test's Redis keys are
// deleted (rebuilt from Postgres), and that the check fails on a planted
// error in Postgres.
func TestThreadCountsMatchModel(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := context.Background()
	m := &threadModel{heads: map[thread.Ref]int64{}, keys: map[thread.Key]*modelKey{}}
	const clients, usersPer, opsPer = 4, 3, 120
	var users []string
	for i := range clients * usersPer {
		users = append(users, fmt.Sprintf("tu%d", i))
	}
	setup := receiptsv1connect.NewReceiptServiceClient(&http.Client{Timeout: 15 * time.Second}, "http://"+s.apiAddr, connect.WithProtoJSON())
	refs, seqs, err := setupThreads(ctx, setup, "tc", users)
	require.NoError(t, err)
	var errs atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		w := &threadWorkload{
			cl:  newAPIClient(s.apiAddr, c%2 == 0),
			rng: rand.New(rand.NewPCG(uint64(c), 22)), users: users[c*usersPer : (c+1)*usersPer], all: users,
			refs: refs, seqs: seqs, m: m, errs: &errs, errLog: func(err error) { t.Log(err) },
		}
		wg.Go(func() {
			for range opsPer {
				w.step(ctx)
			}
			for _, h := range w.held {
				w.reply(ctx, h)
			}
		})
	}
	wg.Wait()
	require.Zero(t, errs.Load(), "unexpected errors, or a stale ack that advanced")
	t.Logf("%d thread operations acknowledged", m.ops)

	check := func(phase string) error { return m.problems(ctx, setup, phase, users, refs) }
	require.NoError(t, check("redis"))
	require.NoError(t, m.readByProblems(ctx, setup, "redis", users, refs))

	require.Eventually(t, func() bool {
		lag, err := s.lag(ctx)
		return err == nil && lag == 0
	}, 60*time.Second, 100*time.Millisecond, "persister lag")
	flush := func() {
		keys, err := s.rdb.Keys(ctx, s.prefix+"*").Result()
		require.NoError(t, err)
		require.NotEmpty(t, keys)
		require.NoError(t, s.rdb.Del(ctx, keys...).Err())
	}
	flush()
	require.NoError(t, check("after the flush"))
	require.NoError(t, m.readByProblems(ctx, setup, "after the flush", users, refs))

	// The check can fail: a thread's head lowered in Postgres behind the
	// stores' back, with Redis lost again, must show.
	s.reconciler.stop()
	var victim thread.Ref
	for ref, h := range m.heads {
		if h > 1 {
			victim = ref
		}
	}
	require.NotZero(t, victim.Root, "the workload left no thread with two replies")
	_, err = s.store.Pool().Exec(ctx, `UPDATE thread_heads SET head_seq = head_seq - 1 WHERE channel_id = $1 AND root_seq = $2`, victim.Channel, victim.Root)
	require.NoError(t, err)
	flush()
	require.ErrorContains(t, check("planted"), victim.Channel)

	// The read-by check can fail too: a member's public thread read
	// lowered in Postgres, Redis lost again.
	var reader thread.Key
	for k, mk := range m.keys {
		if mk.read.Seq > 1 {
			reader = k
		}
	}
	require.NotEmpty(t, reader.User, "the workload left no public thread read past reply 1")
	_, err = s.store.Pool().Exec(ctx, `UPDATE thread_states SET read_seq = 0 WHERE user_id = $1 AND channel_id = $2 AND root_seq = $3`,
		reader.User, reader.Channel, reader.Root)
	require.NoError(t, err)
	flush()
	require.ErrorContains(t, m.readByProblems(ctx, setup, "planted", users, refs), fmt.Sprintf("%v reply", reader.Ref))
}

// setupThreads makes users members of three channels named prefix0..2,
// posts message 4 in each (sent by users[0]) and returns the threads on
// messages 2 and 4 of each, with a reply seq counter per thread.
func setupThreads(ctx context.Context, cl receiptsv1connect.ReceiptServiceClient, prefix string, users []string) ([]thread.Ref, map[thread.Ref]*atomic.Int64, error) {
	var refs []thread.Ref
	seqs := map[thread.Ref]*atomic.Int64{}
	for c := range 3 {
		ch := fmt.Sprintf("%s%d", prefix, c)
		for _, u := range users {
			if _, err := cl.JoinChannel(ctx, connect.NewRequest(&receiptsv1.JoinChannelRequest{ChannelId: ch, UserId: u})); err != nil {
				return nil, nil, err
			}
		}
		if _, err := cl.NotifyMessage(ctx, connect.NewRequest(&receiptsv1.NotifyMessageRequest{ChannelId: ch, Seq: 4, SenderId: users[0]})); err != nil {
			return nil, nil, err
		}
		for root := int64(2); root <= 4; root += 2 {
			ref := thread.Ref{Channel: ch, Root: root}
			refs, seqs[ref] = append(refs, ref), &atomic.Int64{}
		}
	}
	return refs, seqs, nil
}

// problems compares every user's followed threads (ListThreads) and
// GetUnread's per-channel thread counts with the model, on threads set
// up by setupThreads; phase names the moment in each problem.
func (m *threadModel) problems(ctx context.Context, cl receiptsv1connect.ReceiptServiceClient, phase string, users []string, refs []thread.Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var problems []error
	for _, u := range users {
		res, err := cl.ListThreads(ctx, connect.NewRequest(&receiptsv1.ListThreadsRequest{UserId: u, Limit: 1000}))
		if err != nil {
			return err
		}
		got := map[thread.Ref][2]int64{}
		for _, th := range res.Msg.GetThreads() {
			got[thread.Ref{Channel: th.GetChannelId(), Root: th.GetRootSeq()}] = [2]int64{th.GetUnreadCount(), th.GetMentionCount()}
		}
		perChannel := map[string]int64{}
		for _, ref := range refs {
			k := thread.Key{User: u, Ref: ref}
			mk := m.key(k)
			g, listed := got[ref]
			if listed != mk.member {
				problems = append(problems, fmt.Errorf("%s %v: listed %v, model follows %v", phase, k, listed, mk.member))
				continue
			}
			if !listed {
				continue
			}
			un, me := m.counts(k)
			if g != [2]int64{un, me} {
				problems = append(problems, fmt.Errorf("%s %v: (unread, mentions) = %v, model %v (read %v private %v head %d)",
					phase, k, g, [2]int64{un, me}, mk.read, mk.private, m.heads[ref]))
			}
			if un > 0 {
				perChannel[ref.Channel]++
			}
		}
		un, err := cl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: u}))
		if err != nil {
			return err
		}
		for _, c := range un.Msg.GetChannels() {
			if c.GetUnreadThreads() != perChannel[c.GetChannelId()] {
				problems = append(problems, fmt.Errorf("%s %s %s: unread threads %d, model %d", phase, u, c.GetChannelId(), c.GetUnreadThreads(), perChannel[c.GetChannelId()]))
			}
			want := int64(4) // the channel's own messages; its sender read them
			if u == users[0] {
				want = 0
			}
			if c.GetUnreadCount() != want {
				problems = append(problems, fmt.Errorf("%s %s %s: channel unread %d, want %d: replies never count", phase, u, c.GetChannelId(), c.GetUnreadCount(), want))
			}
		}
	}
	return errors.Join(problems...)
}

// readByProblems compares thread read-by (every reply of every thread:
// who read it, who has it, who has not read it) with the model: a member
// is a reader when their public thread read is at or past the reply
// (private reads never show), has it when they also replied at or read
// past it; the threads' channels are small, so the lists are detailed.
func (m *threadModel) readByProblems(ctx context.Context, cl receiptsv1connect.ReceiptServiceClient, phase string, users []string, refs []thread.Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var problems []error
	names := func(ms []*receiptsv1.MemberAt) []string {
		var out []string
		for _, x := range ms {
			out = append(out, x.GetUserId())
		}
		slices.Sort(out)
		return out
	}
	for _, ref := range refs {
		for seq := int64(1); seq <= m.heads[ref]; seq++ {
			res, err := cl.GetThreadMessageReceipts(ctx, connect.NewRequest(&receiptsv1.GetThreadMessageReceiptsRequest{ChannelId: ref.Channel, RootSeq: ref.Root, Seq: seq}))
			if err != nil {
				return err
			}
			var readBy, deliveredTo, pending []string
			for _, u := range users {
				k := thread.Key{User: u, Ref: ref}
				switch {
				case m.key(k).read.Seq >= seq:
					readBy, deliveredTo = append(readBy, u), append(deliveredTo, u)
				default:
					if m.delivered[k] >= seq {
						deliveredTo = append(deliveredTo, u)
					}
					pending = append(pending, u)
				}
			}
			slices.Sort(readBy)
			slices.Sort(deliveredTo)
			slices.Sort(pending)
			got := res.Msg
			gotPending := slices.Sorted(slices.Values(got.GetPending()))
			if !got.GetDetailed() || !slices.Equal(names(got.GetReadBy()), readBy) || !slices.Equal(names(got.GetDeliveredTo()), deliveredTo) ||
				!slices.Equal(gotPending, pending) || got.GetReadCount() != int64(len(readBy)) || got.GetDeliveredCount() != int64(len(deliveredTo)) {
				problems = append(problems, fmt.Errorf("%s %v reply %d: read by %v, delivered to %v, pending %v (detailed %v); model %v, %v, %v",
					phase, ref, seq, names(got.GetReadBy()), names(got.GetDeliveredTo()), gotPending, got.GetDetailed(), readBy, deliveredTo, pending))
			}
		}
	}
	return errors.Join(problems...)
}
