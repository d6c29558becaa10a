package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// noticer posts message notices beside the mark driver during the fault
// suite, on channels and users of its own (the driver's marks carry seqs
// no notice covers, so they must not share channels with heads). Like an
// upstream chat server, it retries a notice until it is acknowledged, so
// when it halts every notice it took a seq for was applied, and its model
// is exact: every store merges notices (heads by max, the sender's read by
// max, mentions by union), so neither order nor duplicates matter. It also
// sets notification levels and mutes (noticerlevels_test.go), so the badge
// totals are checked by level through every fault.
type noticer struct {
	api      string
	channels []string
	users    []string
	seqs     []atomic.Int64
	pause    time.Duration
	stop     chan struct{}
	wg       sync.WaitGroup

	mu       sync.Mutex
	heads    map[string]int64
	reads    map[receipt.Key]int64
	mentions map[receipt.Key]map[int64]bool
	levels   map[receipt.Key]levelSet
	// deleted are the acknowledged deletions, groups the acknowledged
	// mention_all notices (seq → sender), per channel.
	deleted map[string]map[int64]bool
	groups  map[string]map[int64]string
	acked   atomic.Int64
	// levelsAcked counts acknowledged SetNotifications calls.
	levelsAcked atomic.Int64
	clients     int
	retries     atomic.Int64
	// h, when set, records every acknowledged notice.
	h *history
}

// noticeLoad is how many channels and users the noticer posts on, from
// how many clients, and how long each client pauses between calls.
type noticeLoad struct {
	channels, users, clients int
	pause                    time.Duration
}

func startNoticer(api string, nl noticeLoad, h *history, seed uint64) *noticer {
	n := &noticer{api: api, h: h, pause: nl.pause, seqs: make([]atomic.Int64, nl.channels), stop: make(chan struct{}),
		heads: map[string]int64{}, reads: map[receipt.Key]int64{}, mentions: map[receipt.Key]map[int64]bool{},
		levels: map[receipt.Key]levelSet{}, clients: nl.clients,
		deleted: map[string]map[int64]bool{}, groups: map[string]map[int64]string{}}
	for i := range nl.channels {
		n.channels = append(n.channels, fmt.Sprintf("n%d", i))
	}
	for i := range nl.users {
		n.users = append(n.users, fmt.Sprintf("p%d", i))
	}
	for c := range nl.clients {
		n.wg.Go(func() { n.client(c, seed+uint64(c)) })
	}
	return n
}

func (n *noticer) halt() {
	close(n.stop)
	n.wg.Wait()
}

func (n *noticer) client(i int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	hc := &http.Client{Timeout: 15 * time.Second}
	cl := receiptsv1connect.NewReceiptServiceClient(hc, "http://"+n.api, connect.WithProtoJSON())
	if i%2 == 0 {
		hc.Transport = h2cTransport()
		cl = receiptsv1connect.NewReceiptServiceClient(hc, "http://"+n.api, connect.WithGRPC())
	}
	for {
		select {
		case <-n.stop:
			return
		default:
		}
		if rng.Float64() < 0.15 {
			if !n.setLevel(cl, i, n.clients, rng) {
				return // the check will report the register as missing
			}
			continue
		}
		req := &receiptsv1.NotifyMessagesRequest{}
		for range 10 {
			c := rng.IntN(len(n.channels))
			seq := n.seqs[c].Add(1)
			req.Notices = append(req.Notices, &receiptsv1.MessageNotice{ChannelId: n.channels[c], Seq: seq,
				MessageId: fmt.Sprintf("m%d", seq), SenderId: n.users[rng.IntN(len(n.users))],
				Mentions: []string{n.users[rng.IntN(len(n.users))]}, MentionAll: rng.Float64() < 0.1})
			if rng.Float64() < 0.05 { // a deletion, maybe of a message not yet announced
				req.Notices = append(req.Notices, &receiptsv1.MessageNotice{ChannelId: n.channels[c], Seq: 1 + rng.Int64N(seq+2), Deleted: true})
			}
		}
		// Until acknowledged: after halt, for at most a minute more.
		deadline := time.Now().Add(time.Minute)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			resp, err := cl.NotifyMessages(ctx, connect.NewRequest(req))
			cancel()
			if err == nil {
				n.apply(req, resp.Msg)
				break
			}
			n.retries.Add(1)
			if time.Now().After(deadline) {
				return // the check will report this batch as missing
			}
			time.Sleep(100 * time.Millisecond) // a client's back-off between retries, not synchronisation
		}
		if n.pause > 0 {
			time.Sleep(n.pause) // the load's pace, not synchronisation
		}
	}
}

func (n *noticer) apply(req *receiptsv1.NotifyMessagesRequest, resp *receiptsv1.NotifyMessagesResponse) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, nt := range req.GetNotices() {
		n.acked.Add(1)
		if nt.GetDeleted() {
			if n.deleted[nt.ChannelId] == nil {
				n.deleted[nt.ChannelId] = map[int64]bool{}
			}
			n.deleted[nt.ChannelId][nt.Seq] = true
			continue
		}
		if nt.GetMentionAll() {
			if n.groups[nt.ChannelId] == nil {
				n.groups[nt.ChannelId] = map[int64]string{}
			}
			n.groups[nt.ChannelId][nt.Seq] = nt.SenderId
		}
		n.heads[nt.ChannelId] = max(n.heads[nt.ChannelId], nt.Seq)
		k := receipt.Key{User: nt.SenderId, Channel: nt.ChannelId}
		n.reads[k] = max(n.reads[k], nt.Seq)
		if n.h != nil {
			for _, w := range noticeWrites(nt.ChannelId, nt.Seq, nt.SenderId, resp.GetResults()[i].GetMentioned(), resp.GetResults()[i].GetDurability().String()) {
				n.h.ack(w)
			}
		}
		for _, u := range resp.GetResults()[i].GetMentioned() {
			mk := receipt.Key{User: u, Channel: nt.ChannelId}
			if n.mentions[mk] == nil {
				n.mentions[mk] = map[int64]bool{}
			}
			n.mentions[mk][nt.Seq] = true
		}
	}
}

// check compares every (user, channel)'s head, unread and mention counts,
// level and mute from the API, and each user's badge totals, with the
// model; with store, also that Postgres holds every acknowledged
// notification register. It returns the mismatches (at most 5 described).
func (n *noticer) check(ctx context.Context, store *pgstore.Store) (int, []string, error) {
	cl := receiptsv1connect.NewReceiptServiceClient(&http.Client{Timeout: 15 * time.Second}, "http://"+n.api, connect.WithProtoJSON())
	n.mu.Lock()
	defer n.mu.Unlock()
	bad := 0
	var first []string
	problem := func(p string) {
		bad++
		if len(first) < 5 {
			first = append(first, p)
		}
	}
	for _, u := range n.users {
		resp, err := cl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: u, ChannelId: n.channels}))
		if err != nil {
			return 0, nil, err
		}
		nowMs := time.Now().UnixMilli()
		var want badge
		for _, c := range resp.Msg.GetChannels() {
			k := receipt.Key{User: u, Channel: c.GetChannelId()}
			read, head := n.reads[k], n.heads[k.Channel]
			unread, mentions := n.wantCounts(k, read, head, nowMs)
			capped := mentions > channel.MentionCapDefault
			w := [4]int64{head, unread, min(mentions, channel.MentionCapDefault), boolInt64(capped)}
			got := [4]int64{c.GetHead().GetSeq(), c.GetUnreadCount(), c.GetMentionCount(), boolInt64(c.GetMentionsCapped())}
			if got != w {
				problem(fmt.Sprintf("%s: (head, unread, mentions, capped) = %v, model %v", k.KafkaKey(), got, w))
			}
			if p := n.levelProblem(k, c, nowMs); p != "" {
				problem(p)
			}
			l, muted := n.wantLevel(k, nowMs)
			want.add(l, muted, w[1], w[2])
		}
		got := badge{resp.Msg.GetUnreadTotal(), resp.Msg.GetChannelsWithUnread(), resp.Msg.GetMentionTotal()}
		if got != want {
			problem(fmt.Sprintf("%s: badge (unread, channels, mentions) = %v, model %v", u, got, want))
		}
	}
	if store != nil {
		behind, err := n.levelsBehind(ctx, store)
		if err != nil {
			return 0, nil, err
		}
		for _, p := range behind {
			problem(p)
		}
	}
	return bad, first, nil
}

func boolInt64(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
