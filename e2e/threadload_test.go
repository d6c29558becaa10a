package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/thread"
)

// threader keeps thread traffic on a stack during a fault run, on channels
// and users of its own (thc0..2, thu0..9): replies (mentions, duplicates), public and private
// thread reads, deleted replies and follows. Every one is a merge, so each call is retried
// until it is acknowledged (a retry after an ambiguous failure changes
// nothing) and the model of what was acknowledged is exact once the
// threader halts. Mark-unread is left to the thread model test: each takes
// a new epoch, so a blind retry is not the same call.
type threader struct {
	m     *threadModel
	refs  []thread.Ref
	seqs  map[thread.Ref]*atomic.Int64
	users []string
	api   string
	stop  chan struct{}
	wg    sync.WaitGroup

	acked, retries atomic.Int64

	// What ListThreads answered, per followed thread: (head, public read).
	// A smaller answer later is a read that went backwards.
	seenMu    sync.Mutex
	seen      map[thread.Key][2]int64
	regressed atomic.Int64
}

// startThreader sets up its threads (users joined, roots posted) and starts
// two clients (gRPC, Connect JSON) and a reader.
func startThreader(t *testing.T, api string, seed uint64) *threader {
	t.Helper()
	th := &threader{m: &threadModel{heads: map[thread.Ref]int64{}, keys: map[thread.Key]*modelKey{}},
		api: api, stop: make(chan struct{}), seen: map[thread.Key][2]int64{}}
	for i := range 10 {
		th.users = append(th.users, fmt.Sprintf("thu%d", i))
	}
	var err error
	th.refs, th.seqs, err = setupThreads(context.Background(), newAPIClient(th.api, false), "thc", th.users)
	require.NoError(t, err)
	for c := range 2 {
		cl := newAPIClient(api, c == 0)
		rng := rand.New(rand.NewPCG(seed+uint64(c), 23))
		th.wg.Go(func() {
			for th.step(cl, rng) {
			}
		})
	}
	th.wg.Go(th.read)
	return th
}

func (th *threader) halt() {
	close(th.stop)
	th.wg.Wait()
}

// until makes a call until it is acknowledged: after halt, for at most a
// minute more. It reports whether the call was acknowledged.
func (th *threader) until(call func(ctx context.Context) error) bool {
	var deadline time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := call(ctx)
		cancel()
		if err == nil {
			th.acked.Add(1)
			return true
		}
		th.retries.Add(1)
		select {
		case <-th.stop:
			if deadline.IsZero() {
				deadline = time.Now().Add(time.Minute)
			}
			if time.Now().After(deadline) {
				return false
			}
		default:
		}
		time.Sleep(100 * time.Millisecond) // a client's back-off between retries, not synchronisation
	}
}

// waitAcked polls until n thread calls were acknowledged.
func (th *threader) waitAcked(t testing.TB, n int64, within time.Duration) {
	t.Helper()
	start, deadline := time.Now(), time.Now().Add(within)
	for th.acked.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d thread calls acknowledged within %s (%d)", n, within, th.acked.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d thread calls acknowledged after %s", n, time.Since(start).Round(time.Millisecond))
}

// step makes one acknowledged call; false when the threader halted.
func (th *threader) step(cl receiptsv1connect.ReceiptServiceClient, rng *rand.Rand) bool {
	select {
	case <-th.stop:
		return false
	default:
	}
	u := th.users[rng.IntN(len(th.users))]
	ref := th.refs[rng.IntN(len(th.refs))]
	k := thread.Key{User: u, Ref: ref}
	th.m.mu.Lock()
	head := th.m.heads[ref]
	th.m.mu.Unlock()
	switch r := rng.Float64(); {
	case r < 0.45 || head == 0: // a reply, sometimes sent twice
		req := &receiptsv1.NotifyThreadReplyRequest{ChannelId: ref.Channel, RootSeq: ref.Root, Seq: th.seqs[ref].Add(1), SenderId: u}
		req.MessageId = fmt.Sprintf("r%d", req.Seq)
		for range rng.IntN(3) {
			req.Mentions = append(req.Mentions, th.users[rng.IntN(len(th.users))])
		}
		for range 1 + boolInt(rng.Float64() < 0.15) {
			var res *connect.Response[receiptsv1.NotifyThreadReplyResponse]
			if !th.until(func(ctx context.Context) (err error) {
				res, err = cl.NotifyThreadReply(ctx, connect.NewRequest(req))
				return err
			}) {
				return false
			}
			th.m.mu.Lock()
			th.m.ops++
			th.m.heads[ref] = max(th.m.heads[ref], req.Seq)
			mk := th.m.key(thread.Key{User: u, Ref: ref})
			mk.raiseRead(mk.at(req.Seq))
			mk.member = true
			th.m.deliver(thread.Key{User: u, Ref: ref}, req.Seq)
			for _, mu := range res.Msg.GetResult().GetMentioned() {
				mm := th.m.key(thread.Key{User: mu, Ref: ref})
				mm.mentions[req.Seq], mm.member = true, true
			}
			th.m.mu.Unlock()
		}
	case r < 0.90: // a public or private read, at or below the acknowledged head
		seq := 1 + rng.Int64N(head)
		private := rng.Float64() < 0.3
		if !th.until(func(ctx context.Context) error {
			_, err := cl.MarkThreadRead(ctx, connect.NewRequest(&receiptsv1.MarkThreadReadRequest{UserId: u, ChannelId: ref.Channel, RootSeq: ref.Root, Seq: seq, Private: private}))
			return err
		}) {
			return false
		}
		th.m.mu.Lock()
		th.m.ops++
		mk := th.m.key(k)
		if private {
			mk.raisePrivate(mk.at(seq))
		} else {
			mk.raiseRead(mk.at(seq))
			th.m.deliver(k, seq)
		}
		th.m.mu.Unlock()
	case r < 0.94 && th.seqs[ref].Load() > 0: // delete a reply, sometimes one not notified yet
		seq := 1 + rng.Int64N(th.seqs[ref].Load())
		if !th.until(func(ctx context.Context) error {
			_, err := cl.DeleteThreadReply(ctx, connect.NewRequest(&receiptsv1.DeleteThreadReplyRequest{ChannelId: ref.Channel, RootSeq: ref.Root, Seq: seq}))
			return err
		}) {
			return false
		}
		th.m.mu.Lock()
		th.m.ops++
		if th.m.deleted == nil {
			th.m.deleted = map[thread.Ref]map[int64]bool{}
		}
		if th.m.deleted[ref] == nil {
			th.m.deleted[ref] = map[int64]bool{}
		}
		th.m.deleted[ref][seq] = true
		th.m.mu.Unlock()
	default:
		if !th.until(func(ctx context.Context) error {
			_, err := cl.FollowThread(ctx, connect.NewRequest(&receiptsv1.FollowThreadRequest{UserId: u, ChannelId: ref.Channel, RootSeq: ref.Root}))
			return err
		}) {
			return false
		}
		th.m.mu.Lock()
		th.m.ops++
		th.m.key(k).member = true
		th.m.mu.Unlock()
	}
	return true
}

// read lists a user's followed threads every 200 ms and counts every
// thread whose head or public read cursor went backwards.
func (th *threader) read() {
	cl := newAPIClient(th.api, false)
	for i := 0; ; i++ {
		select {
		case <-th.stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		u := th.users[i%len(th.users)]
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, err := cl.ListThreads(ctx, connect.NewRequest(&receiptsv1.ListThreadsRequest{UserId: u, Limit: 1000}))
		cancel()
		if err != nil {
			continue
		}
		th.seenMu.Lock()
		for _, t := range res.Msg.GetThreads() {
			k := thread.Key{User: u, Ref: thread.Ref{Channel: t.GetChannelId(), Root: t.GetRootSeq()}}
			now, before := [2]int64{t.GetHead().GetSeq(), t.GetPublicRead().GetSeq()}, th.seen[k]
			if now[0] < before[0] || now[1] < before[1] {
				th.regressed.Add(1)
			}
			th.seen[k] = [2]int64{max(now[0], before[0]), max(now[1], before[1])}
		}
		th.seenMu.Unlock()
	}
}

// check compares, once the threader halted, the API's thread counts with
// the model, and Postgres with every acknowledged thread cursor, head and
// follow (the durable path must hold them without the sweep). It returns
// how many differ and the first few.
func (th *threader) check(ctx context.Context, store *pgstore.Store) (counts, behind int, first []string, err error) {
	if err := th.m.problems(ctx, newAPIClient(th.api, false), "quiet", th.users, th.refs); err != nil {
		var joined interface{ Unwrap() []error }
		if !errors.As(err, &joined) {
			return 0, 0, nil, err // a call failed, not a count
		}
		for _, p := range joined.Unwrap() {
			counts++
			if len(first) < 5 {
				first = append(first, p.Error())
			}
		}
	}
	th.m.mu.Lock()
	defer th.m.mu.Unlock()
	heads, err := threads.NewStore(store, nil).HeadsPG(ctx, th.refs)
	if err != nil {
		return 0, 0, nil, err
	}
	pgHeads := map[thread.Ref]int64{}
	for _, h := range heads {
		pgHeads[h.Ref] = h.Seq
	}
	for _, ref := range th.refs {
		if pgHeads[ref] < th.m.heads[ref] {
			behind++
			first = append(first, fmt.Sprintf("thread %v: head %d in Postgres, %d acknowledged", ref, pgHeads[ref], th.m.heads[ref]))
		}
	}
	dels, err := deletions.NewStore(store, nil).ReadPG(ctx, th.refs)
	if err != nil {
		return 0, 0, nil, err
	}
	pgDeleted := map[thread.Ref]map[int64]bool{}
	for _, d := range dels {
		ref := thread.Ref{Channel: d.Channel, Root: d.Root}
		pgDeleted[ref] = map[int64]bool{}
		for _, q := range d.Seqs {
			pgDeleted[ref][q] = true
		}
	}
	for ref, seqs := range th.m.deleted {
		for q := range seqs {
			if !pgDeleted[ref][q] {
				behind++
				first = append(first, fmt.Sprintf("thread %v: reply %d deleted, not in Postgres", ref, q))
			}
		}
	}
	var keys []thread.Key
	for k := range th.m.keys {
		keys = append(keys, k)
	}
	states, err := threads.NewStore(store, nil).StatesPG(ctx, keys)
	if err != nil {
		return 0, 0, nil, err
	}
	pg := map[thread.Key]thread.State{}
	for _, st := range states {
		pg[st.Key] = st
	}
	for k, mk := range th.m.keys {
		st := pg[k]
		short := st.Cursors.Read.Position.Compare(mk.read) < 0 || st.Cursors.EffectiveRead().Compare(mk.effective()) < 0 ||
			mk.member && !st.Follow.Following
		if short {
			behind++
			if len(first) < 10 {
				first = append(first, fmt.Sprintf("%v in Postgres: read %v private %v following %v; acknowledged read %v private %v following %v",
					k, st.Cursors.Read.Position, st.Cursors.PrivateRead.Position, st.Follow.Following, mk.read, mk.private, mk.member))
			}
		}
	}
	return counts, behind, first, nil
}
