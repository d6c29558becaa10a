package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
)

// rbThreshold is the detail threshold of the read-by test's stack: the
// small channels have at most this many candidates (one has exactly as
// many), the large one always has more members.
const rbThreshold = 6

// rbClient drives the users one client owns.
type rbClient struct {
	cl      receiptsv1connect.ReceiptServiceClient
	rng     *rand.Rand
	users   []string
	chansOf map[string][]string
	pinned  map[receipt.Key]bool // members who never leave
	seqs    map[string]*atomic.Int64
	m       *rbModel
	dup     float64
	errs    *errList
	// held are notices posted later than their seq was taken (reordering).
	held []*receiptsv1.NotifyMessageRequest
	// eraseAt: step → user erased then (and retired).
	eraseAt map[int]string
	retired map[string]bool
}

// errList keeps the unexpected answers of the workload.
type errList struct {
	mu   sync.Mutex
	errs []error
}

func (e *errList) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *errList) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.errs[:min(len(e.errs), 10)]...)
}

func nowMs() int64 { return time.Now().UnixMilli() }

// rbCall sends req and returns the answer; an error is unexpected unless
// denied and it is NOT_A_MEMBER (then the second result is false, and no
// error).
func rbCall[Req, Resp any](ctx context.Context, w *rbClient, what string, f func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req, denied bool) (*Resp, bool) {
	resp, err := f(ctx, connect.NewRequest(req))
	switch {
	case err != nil && denied && apierr.ReasonOf(err) == apierr.NotAMember:
		return nil, false
	case err != nil:
		w.errs.add(fmt.Errorf("%s %v: %w", what, req, err))
		return nil, false
	case denied:
		w.errs.add(fmt.Errorf("%s %v: accepted from a non-member", what, req))
		return nil, false
	}
	return resp.Msg, true
}

func (w *rbClient) member(k receipt.Key) bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	mk := w.m.keys[k]
	return mk != nil && mk.member
}

func (w *rbClient) ackedHead(ch string) int64 {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.m.heads[ch]
}

// dups is how many times an idempotent request is sent: once, or twice.
func (w *rbClient) dups() int { return 1 + boolInt(w.rng.Float64() < w.dup) }

func (w *rbClient) notify(ctx context.Context, req *receiptsv1.NotifyMessageRequest) {
	for range w.dups() {
		start := nowMs()
		if _, ok := rbCall(ctx, w, "notify", w.cl.NotifyMessage, req, false); !ok {
			return
		}
		end := nowMs() + 1
		w.m.mu.Lock()
		w.m.ops++
		w.m.heads[req.ChannelId] = max(w.m.heads[req.ChannelId], req.Seq)
		if w.m.senders[req.ChannelId] == nil {
			w.m.senders[req.ChannelId] = map[int64]string{}
		}
		w.m.senders[req.ChannelId][req.Seq] = req.SenderId
		mk := w.m.key(receipt.Key{User: req.SenderId, Channel: req.ChannelId})
		mk.raiseRead(req.Seq, start)
		mk.lastEnd = end
		w.m.mu.Unlock()
	}
}

func (w *rbClient) join(ctx context.Context, k receipt.Key, head int64) {
	req := &receiptsv1.JoinChannelRequest{UserId: k.User, ChannelId: k.Channel}
	if head > 0 && w.rng.Float64() < 0.3 {
		s := w.rng.Int64N(head + 1)
		req.Seq = &s
	}
	res, ok := rbCall(ctx, w, "join", w.cl.JoinChannel, req, false)
	if ok {
		w.applyMembership(k, res)
	}
}

func (w *rbClient) applyMembership(k receipt.Key, res *receiptsv1.MembershipResponse) {
	end := nowMs() + 1
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.ops++
	mk := w.m.key(k)
	mk.member = res.GetMembership().GetMember()
	if res.GetChanged() && mk.member && res.GetMembership().GetJoinSeq() > 0 {
		if p := (receipt.Position{Epoch: mk.epoch(), Seq: res.GetMembership().GetJoinSeq()}); p.Compare(mk.private) > 0 {
			mk.private = p
		}
	}
	mk.lastEnd = end
}

func (w *rbClient) step(ctx context.Context, i int) {
	if u, ok := w.eraseAt[i]; ok {
		w.erase(ctx, u)
	}
	var active []string
	for _, u := range w.users {
		if !w.retired[u] {
			active = append(active, u)
		}
	}
	u := active[w.rng.IntN(len(active))]
	chans := w.chansOf[u]
	ch := chans[w.rng.IntN(len(chans))]
	k := receipt.Key{User: u, Channel: ch}
	member := w.member(k)
	head := w.ackedHead(ch)
	switch r := w.rng.Float64(); {
	case r < 0.22 && member: // a message, sometimes held back and posted later
		seq := w.seqs[ch].Add(1)
		req := &receiptsv1.NotifyMessageRequest{ChannelId: ch, Seq: seq, SenderId: u, MessageId: "m" + strconv.FormatInt(seq, 10)}
		if w.rng.Float64() < 0.2 {
			w.held = append(w.held, req)
			return
		}
		w.notify(ctx, req)
		if len(w.held) > 0 && w.rng.Float64() < 0.5 {
			h := w.held[0]
			w.held = w.held[1:]
			w.notify(ctx, h)
		}
	case r < 0.42 && head > 0: // a public or private read, maybe stale
		w.read(ctx, k, 1+w.rng.Int64N(head), w.rng.Float64() < 0.3, !member)
	case r < 0.50 && head > 0: // delivered
		seq := 1 + w.rng.Int64N(head)
		for range w.dups() {
			start := nowMs()
			if _, ok := rbCall(ctx, w, "delivered", w.cl.MarkDelivered, &receiptsv1.MarkRequest{UserId: u, ChannelId: ch, Seq: seq}, !member); !ok {
				return
			}
			end := nowMs() + 1
			w.m.mu.Lock()
			w.m.ops++
			mk := w.m.key(k)
			mk.delivered = max(mk.delivered, seq)
			mk.delMoves = append(mk.delMoves, rbMove{seq, start})
			mk.lastEnd = end
			w.m.mu.Unlock()
		}
	case r < 0.55 && head > 0: // mark unread: private, so others see nothing move
		seq := 1 + w.rng.Int64N(head)
		if _, ok := rbCall(ctx, w, "mark unread", w.cl.MarkUnread, &receiptsv1.MarkUnreadRequest{UserId: u, ChannelId: ch, Seq: seq}, !member); !ok {
			return
		}
		end := nowMs() + 1
		w.m.mu.Lock()
		w.m.ops++
		mk := w.m.key(k)
		mk.private = receipt.Position{Epoch: mk.epoch() + 1, Seq: seq - 1}
		mk.lastEnd = end
		w.m.mu.Unlock()
	case r < 0.58 && head > 0 && member: // a stale ack of an older epoch: changes nothing
		w.m.mu.Lock()
		e := w.m.key(k).epoch()
		w.m.mu.Unlock()
		if e == 0 {
			return
		}
		old := e - 1
		res, ok := rbCall(ctx, w, "stale read", w.cl.MarkRead, &receiptsv1.MarkRequest{UserId: u, ChannelId: ch, Seq: head, Epoch: &old}, false)
		if ok && res.GetResult().GetAdvanced() {
			w.errs.add(fmt.Errorf("a stale-epoch read of %s advanced", k.KafkaKey()))
		}
	case r < 0.70: // join (sometimes at an explicit point)
		w.join(ctx, k, head)
	case r < 0.80 && !w.pinned[k]: // leave
		if res, ok := rbCall(ctx, w, "leave", w.cl.LeaveChannel, &receiptsv1.LeaveChannelRequest{UserId: u, ChannelId: ch}, false); ok {
			w.applyMembership(k, res)
		}
	case r < 0.85: // a sender's client reading ticks or receipts (loads the channel view)
		if w.rng.Float64() < 0.5 {
			rbCall(ctx, w, "ticks", w.cl.GetTicks, &receiptsv1.GetTicksRequest{ChannelId: ch}, false)
		} else if head > 0 {
			rbCall(ctx, w, "receipts", w.cl.GetMessageReceipts, &receiptsv1.GetMessageReceiptsRequest{ChannelId: ch, Seq: 1 + w.rng.Int64N(head)}, false)
		}
	case r >= 0.85: // privacy settings: sharing off more often than on
		req := &receiptsv1.UpdateSettingsRequest{UserId: u}
		v := w.rng.Float64() < 0.6
		if w.rng.Float64() < 0.6 {
			req.ShareReadReceipts = &v
		} else {
			req.ShareDeliveryReceipts = &v
		}
		for range w.dups() {
			res, ok := rbCall(ctx, w, "settings", w.cl.UpdateSettings, req, false)
			if !ok {
				return
			}
			w.m.mu.Lock()
			w.m.ops++
			w.m.share[u] = rbShare{read: res.GetShareReadReceipts(), delivered: res.GetShareDeliveryReceipts()}
			w.m.mu.Unlock()
		}
	}
}

func (w *rbClient) read(ctx context.Context, k receipt.Key, seq int64, private, denied bool) {
	for range w.dups() {
		start := nowMs()
		if _, ok := rbCall(ctx, w, "read", w.cl.MarkRead, &receiptsv1.MarkRequest{UserId: k.User, ChannelId: k.Channel, Seq: seq, Private: private}, denied); !ok {
			return
		}
		end := nowMs() + 1
		w.m.mu.Lock()
		w.m.ops++
		mk := w.m.key(k)
		if private {
			if p := (receipt.Position{Epoch: mk.epoch(), Seq: seq}); p.Compare(mk.private) > 0 {
				mk.private = p
			}
		} else {
			mk.raiseRead(seq, start)
		}
		mk.lastEnd = end
		w.m.mu.Unlock()
	}
}

// rejoinRound has some members with a public cursor leave and join again
// (at the head, or at their public read): the state after quiet then holds
// rejoined members whose join moved no cursor.
func (w *rbClient) rejoinRound(ctx context.Context) {
	for _, u := range w.users {
		if w.retired[u] {
			continue
		}
		for _, ch := range w.chansOf[u] {
			k := receipt.Key{User: u, Channel: ch}
			w.m.mu.Lock()
			mk := w.m.keys[k]
			eligible := mk != nil && mk.member && mk.read.Seq > 0
			var read int64
			if eligible {
				read = mk.read.Seq
			}
			w.m.mu.Unlock()
			if !eligible || w.pinned[k] || w.rng.Float64() < 0.5 {
				continue
			}
			if res, ok := rbCall(ctx, w, "leave", w.cl.LeaveChannel, &receiptsv1.LeaveChannelRequest{UserId: u, ChannelId: ch}, false); ok {
				w.applyMembership(k, res)
			}
			req := &receiptsv1.JoinChannelRequest{UserId: u, ChannelId: ch}
			if w.rng.Float64() < 0.5 {
				req.Seq = &read // a join point the public read already covers
			}
			if res, ok := rbCall(ctx, w, "join", w.cl.JoinChannel, req, false); ok {
				w.applyMembership(k, res)
			}
		}
	}
}

// erase posts the user's held notices, erases the user and retires it.
func (w *rbClient) erase(ctx context.Context, u string) {
	var keep []*receiptsv1.NotifyMessageRequest
	for _, h := range w.held {
		if h.SenderId == u {
			w.notify(ctx, h)
		} else {
			keep = append(keep, h)
		}
	}
	w.held = keep
	if _, ok := rbCall(ctx, w, "erase", w.cl.EraseUser, &receiptsv1.EraseUserRequest{UserId: u}, false); !ok {
		return
	}
	w.retired[u] = true
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.ops++
	w.m.erased[u] = true
	delete(w.m.share, u)
	for k := range w.m.keys {
		if k.User == u {
			delete(w.m.keys, k)
		}
	}
}

// rbGetJSON GETs a REST route into msg.
func rbGetJSON(ctx context.Context, base, path string, msg proto.Message) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return protojson.Unmarshal(b, msg)
}

func rbJSON(m proto.Message) string {
	b, _ := protojson.MarshalOptions{EmitUnpopulated: false}.Marshal(m)
	return string(b)
}

// compareReceipts checks one answer against the model: every field, the
// "at" of each listed member within its bounds.
func compareReceipts(got, want *receiptsv1.MessageReceipts, readAt, delAt map[string][2]int64) error {
	got = proto.Clone(got).(*receiptsv1.MessageReceipts)
	var problems []error
	fix := func(kind string, list []*receiptsv1.MemberAt, bounds map[string][2]int64) {
		for _, ma := range list {
			b, ok := bounds[ma.GetUserId()]
			if !ok {
				continue // the list comparison reports it
			}
			if ma.GetAtUnixMs() < b[0] || ma.GetAtUnixMs() > b[1] {
				problems = append(problems, fmt.Errorf("%s/%d %s %s at %d, outside [%d, %d]", got.GetChannelId(), got.GetSeq(),
					kind, ma.GetUserId(), ma.GetAtUnixMs(), b[0], b[1]))
			}
			ma.AtUnixMs = 0
		}
	}
	fix("read by", got.ReadBy, readAt)
	fix("delivered to", got.DeliveredTo, delAt)
	if !proto.Equal(got, want) {
		problems = append(problems, fmt.Errorf("receipts of %s/%d (at left out):\n  got   %s\n  model %s", want.GetChannelId(), want.GetSeq(), rbJSON(got), rbJSON(want)))
	}
	return errors.Join(problems...)
}

// rbCheck compares every message's receipts (LookupReceipts over Connect,
// and each GET route), every channel's ticks (both transports) and every
// user's badge with the model. It returns what differs, and how many
// (message, member) cells the model hides by settings or a private read.
func rbCheck(ctx context.Context, cl receiptsv1connect.ReceiptServiceClient, base string, m *rbModel, users, channels []string) (hidden, private int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var problems []error
	for _, ch := range channels {
		want := m.wantTicks(ch, users)
		got, err := cl.GetTicks(ctx, connect.NewRequest(&receiptsv1.GetTicksRequest{ChannelId: ch}))
		if err != nil {
			return 0, 0, err
		}
		if !proto.Equal(got.Msg, want) {
			problems = append(problems, fmt.Errorf("ticks of %s:\n  got   %s\n  model %s", ch, rbJSON(got.Msg), rbJSON(want)))
		}
		rest := &receiptsv1.ChannelTicks{}
		if err := rbGetJSON(ctx, base, "/v1/channels/"+ch+"/ticks", rest); err != nil {
			return 0, 0, err
		}
		if !proto.Equal(rest, want) {
			problems = append(problems, fmt.Errorf("REST ticks of %s:\n  got   %s\n  model %s", ch, rbJSON(rest), rbJSON(want)))
		}

		head := m.heads[ch]
		req := &receiptsv1.LookupReceiptsRequest{}
		for seq := int64(1); seq <= head; seq++ {
			req.Messages = append(req.Messages, &receiptsv1.MessageRef{ChannelId: ch, Seq: seq, SenderId: m.senders[ch][seq]})
		}
		if len(req.Messages) == 0 {
			continue
		}
		looked, err := cl.LookupReceipts(ctx, connect.NewRequest(req))
		if err != nil {
			return 0, 0, err
		}
		if n := len(looked.Msg.GetMessages()); n != int(head) {
			return 0, 0, fmt.Errorf("lookup of %s: %d answers for %d messages", ch, n, head)
		}
		for seq := int64(1); seq <= head; seq++ {
			want, readAt, delAt := m.wantReceipts(ch, seq, users)
			if err := compareReceipts(looked.Msg.GetMessages()[seq-1], want, readAt, delAt); err != nil {
				problems = append(problems, err)
			}
			rest := &receiptsv1.MessageReceipts{}
			path := fmt.Sprintf("/v1/channels/%s/messages/%d/receipts?sender_id=%s", ch, seq, url.QueryEscape(m.senders[ch][seq]))
			if err := rbGetJSON(ctx, base, path, rest); err != nil {
				return 0, 0, err
			}
			if err := compareReceipts(rest, want, readAt, delAt); err != nil {
				problems = append(problems, fmt.Errorf("REST: %w", err))
			}
			for _, u := range m.members(ch, users) {
				mk := m.keys[receipt.Key{User: u, Channel: ch}]
				switch {
				case u == m.senders[ch][seq]:
				case mk.read.Seq >= seq && !m.shares(u).read:
					hidden++
				case mk.read.Seq < seq && mk.effective().Seq >= seq:
					private++
				}
			}
		}
	}
	var badges []*receiptsv1.Badge
	for _, u := range users {
		badges = append(badges, m.wantBadge(u, channels))
	}
	looked, err := cl.LookupReceipts(ctx, connect.NewRequest(&receiptsv1.LookupReceiptsRequest{BadgeUserIds: users}))
	if err != nil {
		return 0, 0, err
	}
	for i, b := range looked.Msg.GetBadges() {
		if !proto.Equal(b, badges[i]) {
			problems = append(problems, fmt.Errorf("badge of %s:\n  got   %s\n  model %s", users[i], rbJSON(b), rbJSON(badges[i])))
		}
	}
	return hidden, private, errors.Join(problems...)
}

// rbErasedGone fails unless the erased users have no trace in Redis (their
// hashes, mentions, settings, every channel view's cursors, sets and
// stream) nor in any Postgres table.
func rbErasedGone(t *testing.T, s *stack, erased, channels []string) {
	t.Helper()
	ctx := context.Background()
	for _, u := range erased {
		for _, table := range append(kinds.ErasedTables(), readby.MoveLogTable) {
			rows, err := s.store.Pool().Query(ctx, `SELECT to_jsonb(x)::text FROM `+table+` x WHERE user_id = $1`, u)
			require.NoError(t, err)
			left, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Empty(t, left, "erased %s: rows in %s", u, table)
		}
		require.Zero(t, s.redisTraces(t, u), "erased %s: cursors or registers in Redis", u)
		n, err := s.rdb.Exists(ctx, settings.NewStore(nil, s.rstore).RedisKey(u)).Result()
		require.NoError(t, err)
		require.Zero(t, n, "erased %s: settings in Redis", u)
		for _, ch := range channels {
			fields, err := s.rdb.HMGet(ctx, readby.NewStore(nil, s.rstore).CurKey(ch), "r:"+u, "d:"+u).Result()
			require.NoError(t, err)
			require.Equal(t, []any{nil, nil}, fields, "erased %s: cursors in the view of %s", u, ch)
			for _, k := range []string{"r", "d"} {
				err := s.rdb.ZScore(ctx, s.prefix+"cv:{"+ch+"}:"+k, u).Err()
				require.ErrorIs(t, err, redis.Nil, "erased %s: in the view set %s of %s", u, k, ch)
			}
			entries, err := s.rdb.XRange(ctx, readby.NewStore(nil, s.rstore).StreamKey(ch), "-", "+").Result()
			require.NoError(t, err)
			for _, e := range entries {
				// The erasure's own removal entries (rm) tell watchers; no move stays.
				if e.Values["rm"] == nil {
					require.NotEqual(t, u, e.Values["u"], "erased %s: a move in the stream of %s", u, ch)
				}
			}
		}
	}
}

// TestReadByModel drives marks (public, private, delivered, stale,
// mark-unread), messages, joins, leaves, privacy settings and erasures
// from concurrent clients (gRPC and Connect JSON) with duplicates and
// reordering (held notices, stale reads), kills the persister with -9
// midway, and once quiet checks every message's receipts (read_by,
// delivered_to with their "at", pending, counts), every channel's ticks
// and every user's badge against the model: small channels (one at
// exactly the detail threshold) and a large one (counts only). Then the
// same after every key of the test's Redis prefix is deleted (the test's
// FLUSHALL: answers rebuilt from Postgres), and again after the topic is
// replayed from offset 0. Erased users are gone from every store each time.
func TestReadByModel(t *testing.T) {
	t.Parallel()
	thr := strconv.Itoa(rbThreshold)
	s := newStack(t, stackOptions{
		extraGateArgs:      []string{"--receipts-detail-threshold", thr},
		extraPersisterArgs: []string{"--receipts-detail-threshold", thr},
	})
	ctx := context.Background()
	const clients, opsPer = 4, 150
	var users []string
	for i := range 16 {
		users = append(users, fmt.Sprintf("u%02d", i))
	}
	// Small channels of 5, 5 and 6 (= the threshold) candidates; the large
	// one has every user, the first 12 joined for good.
	small := map[string][]string{"s0": users[0:5], "s1": users[5:10], "s2": users[10:16]}
	channels := []string{"L", "s0", "s1", "s2"}
	chansOf, pinned := map[string][]string{}, map[receipt.Key]bool{}
	for ch, us := range small {
		for _, u := range us {
			chansOf[u] = append(chansOf[u], ch)
		}
	}
	for i, u := range users {
		chansOf[u] = append(chansOf[u], "L")
		if i < 12 {
			pinned[receipt.Key{User: u, Channel: "L"}] = true
		}
	}
	seqs := map[string]*atomic.Int64{}
	for _, ch := range channels {
		seqs[ch] = &atomic.Int64{}
	}
	m := &rbModel{heads: map[string]int64{}, senders: map[string]map[int64]string{}, keys: map[receipt.Key]*rbKey{},
		share: map[string]rbShare{}, erased: map[string]bool{}}
	errs := &errList{}
	// u03 (pinned in L, in s0) and u14 (in s2 and L, not pinned) are erased midway.
	eraseAt := map[string]int{"u03": 60, "u14": 100}
	half := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		w := &rbClient{
			cl:  newAPIClient(s.apiAddr, c%2 == 0),
			rng: rand.New(rand.NewPCG(uint64(c), 9)), chansOf: chansOf, pinned: pinned, seqs: seqs, m: m,
			dup: 0.15, errs: errs, eraseAt: map[int]string{}, retired: map[string]bool{},
		}
		for i := c; i < len(users); i += clients {
			w.users = append(w.users, users[i])
			if at, ok := eraseAt[users[i]]; ok {
				w.eraseAt[at] = users[i]
			}
		}
		wg.Go(func() {
			for _, u := range w.users { // everyone joins their channels first
				for _, ch := range chansOf[u] {
					if ch != "L" || pinned[receipt.Key{User: u, Channel: ch}] || w.rng.Float64() < 0.5 {
						w.join(ctx, receipt.Key{User: u, Channel: ch}, 0)
					}
				}
			}
			for i := range opsPer {
				if c == 0 && i == opsPer/2 {
					close(half)
				}
				w.step(ctx, i)
			}
			for _, h := range w.held {
				w.notify(ctx, h)
			}
			w.rejoinRound(ctx)
		})
	}
	<-half
	s.persister.kill9() // mid-load: its batch in hand is lost, Kafka replays it
	s.persister.start(t)
	s.waitReady(s.persister)
	wg.Wait()
	require.NoError(t, errs.err(), "unexpected answers")
	t.Logf("%d operations acknowledged", m.ops)
	require.Len(t, m.erased, 2, "both erasures ran")
	erased := []string{"u03", "u14"}

	cl := receiptsv1connect.NewReceiptServiceClient(&http.Client{Timeout: 15 * time.Second}, "http://"+s.apiAddr, connect.WithProtoJSON())
	base := "http://" + s.apiAddr
	check := func(phase string) {
		t.Helper()
		hidden, private, err := rbCheck(ctx, cl, base, m, users, channels)
		require.NoError(t, err, phase)
		t.Logf("%s: model holds %d (message, member) cells hidden by settings, %d by a private read", phase, hidden, private)
		require.NotZero(t, hidden, "the workload hid no read by a setting")
		require.NotZero(t, private, "the workload made no private read that shows")
	}
	s.waitQuiet(t)
	check("from redis")
	rbErasedGone(t, s, erased, channels)

	// The test's FLUSHALL: every key under its prefix.
	redisFlush(t, s)
	check("after the flush")
	rbErasedGone(t, s, erased, channels)

	// Replay the whole topic from offset 0, then lose Redis again.
	rewindPersister(t, s)
	s.waitQuiet(t)
	redisFlush(t, s)
	check("after the replay")
	rbErasedGone(t, s, erased, channels)

	// A hidden member's cursor that reached the view anyway (a mark whose
	// settings were read just before the user hid reads, from another
	// device) still never shows in a small channel: answers filter by the
	// settings they read.
	planted := 0
	for _, ch := range []string{"s0", "s1", "s2"} {
		for _, u := range m.members(ch, users) {
			if !m.shares(u).read {
				_, err := readby.NewStore(nil, s.rstore).Apply(ctx, []readby.Move{{Channel: ch, User: u, Side: readby.Read,
					Position: receipt.Position{Epoch: 9, Seq: m.heads[ch]}, AtUnixMs: nowMs()}}, 0)
				require.NoError(t, err)
				planted++
			}
		}
	}
	require.NotZero(t, planted, "no member of a small channel hides reads")
	check("a hidden cursor in the view")

	// The check can fail: a member's sharing turned off behind the
	// stores' back must show (after Redis forgets the settings).
	var victim string
	for _, ch := range []string{"s0", "s1", "s2"} {
		for _, u := range small[ch] {
			mk := m.keys[receipt.Key{User: u, Channel: ch}]
			if mk != nil && mk.member && m.shares(u).read { // their ticks show a read cursor
				victim = u
			}
		}
	}
	require.NotEmpty(t, victim, "no member of a small channel shares reads")
	_, err := s.store.Pool().Exec(ctx, `INSERT INTO user_settings (user_id, share_read, share_delivered, version_ms) VALUES ($1, false, true, 1)
ON CONFLICT (user_id) DO UPDATE SET share_read = false`, victim)
	require.NoError(t, err)
	redisFlush(t, s)
	_, _, err = rbCheck(ctx, cl, base, m, users, channels)
	require.ErrorContains(t, err, victim)
}

// redisFlush deletes every key under the test's Redis prefix (the shared
// Redis cannot be flushed).
func redisFlush(t *testing.T, s *stack) {
	t.Helper()
	keys, err := s.rdb.Keys(context.Background(), s.prefix+"*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	require.NoError(t, s.rdb.Del(context.Background(), keys...).Err())
}
