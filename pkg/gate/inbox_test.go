package gate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/thread"
)

// The inbox over REST, gRPC and Connect: a user's channels newest activity
// first, paged without duplicates or gaps, each line with GetUnread's
// counts and the id of its first unread message; a new message moves its
// channel to the top; bad tokens and limits are refused; after Redis
// loses every key the same lines come back (ids excepted: Redis keeps
// them alone).
func TestInboxOrdersByActivityWithGetUnreadsCounts(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	tb := setup(t, setupOpts{config: func(c *testConfig) {
		c.Clock = func() time.Time { return time.UnixMilli(clock.Add(1000)) }
	}})
	startPersister(t, tb)
	ctx := context.Background()
	connectCl := tb.client()
	// Seven channels; channel ib<i> gets i+1 messages, the last at time i.
	const n = 7
	for i := range n {
		ch := fmt.Sprintf("ib%d", i)
		tb.ok(t, http.MethodPut, "/v1/channels/"+ch+"/members/iu", `{}`)
		for q := 1; q <= i+1; q++ {
			tb.ok(t, http.MethodPost, "/v1/channels/"+ch+"/messages", fmt.Sprintf(`{"seq": %d, "message_id": "%s-m%d", "sender_id": "x"}`, q, ch, q))
		}
	}
	tb.ok(t, http.MethodPost, "/v1/users/iu/channels/ib4/read", `{"seq": 2}`)

	// All pages, each protocol in turn.
	type line struct {
		ch      string
		at      int64
		unread  int64
		firstID string
	}
	walk := func(limit int32) []line {
		t.Helper()
		var out []line
		for _, l := range inboxPages(t, tb, "iu", limit) {
			out = append(out, line{l.GetChannel().GetChannelId(), l.GetLastActivityUnixMs(), l.GetChannel().GetUnreadCount(), l.GetFirstUnreadMessageId()})
		}
		return out
	}
	order := func(ls []line) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.ch)
		}
		return out
	}
	lines := walk(3)
	require.Equal(t, []string{"ib6", "ib5", "ib4", "ib3", "ib2", "ib1", "ib0"}, order(lines), "newest activity first, every channel once")
	for i := 1; i < len(lines); i++ {
		require.Greater(t, lines[i-1].at, lines[i].at)
	}
	// Counts are GetUnread's; the first unread message's id is known.
	unread, err := connectCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "iu"}))
	require.NoError(t, err)
	want := map[string]int64{}
	for _, c := range unread.Msg.GetChannels() {
		want[c.GetChannelId()] = c.GetUnreadCount()
	}
	for _, l := range lines {
		require.Equal(t, want[l.ch], l.unread, l.ch)
	}
	require.Equal(t, line{"ib4", lines[2].at, 3, "ib4-m3"}, lines[2], "read to 2 of 5: the first unread is message 3")
	require.Equal(t, "ib0-m1", lines[6].firstID)

	// A new message moves its channel to the top; a deleted first unread
	// message moves the id to the next.
	tb.ok(t, http.MethodPost, "/v1/channels/ib1/messages", `{"seq": 3, "message_id": "ib1-m3", "sender_id": "x"}`)
	tb.ok(t, http.MethodDelete, "/v1/channels/ib4/messages/3", ``)
	lines = walk(2)
	require.Equal(t, []string{"ib1", "ib6", "ib5", "ib4", "ib3", "ib2", "ib0"}, order(lines))
	require.Equal(t, "ib4-m4", lines[3].firstID)
	require.Equal(t, int64(2), lines[3].unread)

	// Refusals.
	for _, tc := range []struct {
		req  *receiptsv1.GetInboxRequest
		want apierr.Reason
	}{
		{&receiptsv1.GetInboxRequest{UserId: "iu", Limit: 201}, apierr.InvalidField},
		{&receiptsv1.GetInboxRequest{UserId: "iu", Limit: -1}, apierr.InvalidField},
		{&receiptsv1.GetInboxRequest{UserId: "iu", PageToken: "!!"}, apierr.InvalidField},
		{&receiptsv1.GetInboxRequest{UserId: "iu", PageToken: "bm90IGEgdG9rZW4"}, apierr.InvalidField},
		{&receiptsv1.GetInboxRequest{UserId: "a{b}"}, apierr.InvalidID},
	} {
		_, err := connectCl.GetInbox(ctx, connect.NewRequest(tc.req))
		apierrtest.Refused(t, err, connect.CodeInvalidArgument, tc.want)
	}
	status, body := tb.do(t, http.MethodGet, "/v1/users/iu/inbox?limit=500", "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidField)

	// Redis loses everything: the same order and counts, from Postgres.
	var chs []string
	for i := range n {
		chs = append(chs, fmt.Sprintf("ib%d", i))
	}
	require.Eventually(t, func() bool {
		heads, err := headkind.NewStore(tb.schema.Store, nil).ReadPG(ctx, chs)
		require.NoError(t, err)
		dels, err := deletions.NewStore(tb.schema.Store, nil).ReadPG(ctx, []thread.Ref{{Channel: "ib4"}})
		require.NoError(t, err)
		sts, err := cursors.NewPostgres(tb.schema.Store).Get(ctx, "iu", []string{"ib4"})
		require.NoError(t, err)
		return len(heads) == n && heads[1].Seq == 3 && len(dels) == 1 && len(sts) == 1 && sts[0].Read.Position.Seq == 2
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the heads, the deletion and the read")
	redistest.DeletePrefix(ctx, tb.rdb, tb.prefix)
	after := walk(4)
	require.Equal(t, order(lines), order(after))
	for i := range after {
		require.Equal(t, lines[i].unread, after[i].unread)
	}
}

// A followed thread with unread replies is a line of its own, ordered by
// its latest reply among the channels, with ListThreads' counts and the
// id of its first unread reply (REST, gRPC and Connect); read up to its
// head, it leaves the inbox; pages run across both kinds of line.
func TestInboxThreadLines(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	// The follow must be versioned after the joins, which Redis' clock
	// versions: an hour ahead holds however slowly a loaded run goes.
	clock.Store(time.Now().Add(time.Hour).UnixMilli())
	tb := setup(t, setupOpts{config: func(c *testConfig) {
		c.Clock = func() time.Time { return time.UnixMilli(clock.Add(1000)) }
	}})
	startPersister(t, tb)
	ctx := context.Background()
	for _, ch := range []string{"ta", "tb"} {
		tb.ok(t, http.MethodPut, "/v1/channels/"+ch+"/members/tu", `{}`)
		tb.ok(t, http.MethodPut, "/v1/channels/"+ch+"/members/tx", `{}`)
		tb.ok(t, http.MethodPost, "/v1/channels/"+ch+"/messages", `{"seq": 1, "message_id": "`+ch+`-m1", "sender_id": "tx"}`)
	}
	// Thread ta/1: tu follows it; two replies, the second mentions tu.
	tb.ok(t, http.MethodPut, "/v1/users/tu/channels/ta/threads/1/follow", `{}`)
	tb.ok(t, http.MethodPost, "/v1/channels/ta/threads/1/messages", `{"seq": 1, "message_id": "ta-r1", "sender_id": "tx"}`)
	tb.ok(t, http.MethodPost, "/v1/channels/ta/threads/1/messages", `{"seq": 2, "message_id": "ta-r2", "sender_id": "tx", "mentions": ["tu"]}`)
	tb.ok(t, http.MethodPost, "/v1/channels/tb/messages", `{"seq": 2, "message_id": "tb-m2", "sender_id": "tx"}`)

	type line struct {
		ch               string
		root, unread     int64
		mentions         int64
		firstID          string
		hasChannelCounts bool
	}
	walk := func(limit int32) []line {
		t.Helper()
		var out []line
		for _, l := range inboxPages(t, tb, "tu", limit) {
			if th := l.GetThread(); th != nil {
				require.Nil(t, l.GetChannel(), "a line is a channel or a thread")
				out = append(out, line{th.GetChannelId(), th.GetRootSeq(), th.GetUnreadCount(), th.GetMentionCount(), l.GetFirstUnreadMessageId(), false})
				continue
			}
			c := l.GetChannel()
			out = append(out, line{c.GetChannelId(), 0, c.GetUnreadCount(), c.GetMentionCount(), l.GetFirstUnreadMessageId(), true})
		}
		return out
	}
	want := []line{
		{"tb", 0, 2, 0, "tb-m1", true},
		{"ta", 1, 2, 1, "ta-r1", false},
		{"ta", 0, 1, 0, "ta-m1", true},
	}
	for _, limit := range []int32{1, 2, 50} {
		require.Equal(t, want, walk(limit), "limit %d", limit)
	}

	// A new reply moves the thread to the top; its first unread reply
	// stays the first.
	tb.ok(t, http.MethodPost, "/v1/channels/ta/threads/1/messages", `{"seq": 3, "message_id": "ta-r3", "sender_id": "tx"}`)
	moved := []line{{"ta", 1, 3, 1, "ta-r1", false}, want[0], want[2]}
	require.Equal(t, moved, walk(2))

	// Redis loses everything: the same lines, from Postgres; of the ids
	// (Redis keeps them alone) only the heads' come back, with the heads.
	ref := thread.Ref{Channel: "ta", Root: 1}
	require.Eventually(t, func() bool {
		heads, err := threads.NewStore(tb.schema.Store, nil).HeadsPG(ctx, []thread.Ref{ref})
		require.NoError(t, err)
		sts, err := threads.NewStore(tb.schema.Store, nil).StatesPG(ctx, []thread.Key{{User: "tu", Ref: ref}})
		require.NoError(t, err)
		chHeads, err := headkind.NewStore(tb.schema.Store, nil).ReadPG(ctx, []string{"ta", "tb"})
		require.NoError(t, err)
		return len(heads) == 1 && heads[0].Seq == 3 && len(sts) == 1 && sts[0].Follow.Following && len(chHeads) == 2 && chHeads[1].Seq == 2
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the heads and the follow")
	redistest.DeletePrefix(ctx, tb.rdb, tb.prefix)
	moved[0].firstID, moved[1].firstID = "", ""
	require.Equal(t, moved, walk(2))

	// Read up to its head, the thread leaves the inbox; the channels stay.
	tb.ok(t, http.MethodPost, "/v1/users/tu/channels/ta/threads/1/read", `{"seq": 3}`)
	require.Equal(t, moved[1:], walk(50))
}

// The inbox's page selection is the first n of a full sort, for any n
// and order, duplicates included.
func TestFirstInOrderIsASortsPrefix(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		items := make([]int, rng.IntN(60))
		for i := range items {
			items[i] = rng.IntN(40)
		}
		n := 1 + rng.IntN(70)
		sorted := slices.Sorted(slices.Values(items))
		want := append([]int{}, sorted[:min(n, len(sorted))]...)
		require.Equal(t, want, gate.FirstInOrder(slices.Clone(items), n), "%v, n %d", items, n)
	}
}

// inboxPages walks a user's whole inbox, limit lines a page, each page
// over the next protocol in turn (Connect, gRPC, REST), and returns its
// lines in order.
func inboxPages(t *testing.T, tb *testBundle, user string, limit int32) []*receiptsv1.InboxLine {
	t.Helper()
	ctx := context.Background()
	connectCl, grpcCl := tb.client(), tb.client(connect.WithGRPC())
	var out []*receiptsv1.InboxLine
	token := ""
	for page := 0; ; page++ {
		req := &receiptsv1.GetInboxRequest{UserId: user, Limit: limit, PageToken: token}
		var resp *receiptsv1.GetInboxResponse
		switch page % 3 {
		case 0:
			r, err := connectCl.GetInbox(ctx, connect.NewRequest(req))
			require.NoError(t, err)
			resp = r.Msg
		case 1:
			r, err := grpcCl.GetInbox(ctx, connect.NewRequest(req))
			require.NoError(t, err)
			resp = r.Msg
		default:
			resp = &receiptsv1.GetInboxResponse{}
			tb.doProto(t, http.MethodGet, fmt.Sprintf("/v1/users/%s/inbox?limit=%d&page_token=%s", user, limit, token), "", resp)
		}
		require.LessOrEqual(t, len(resp.GetLines()), int(limit))
		out = append(out, resp.GetLines()...)
		if resp.GetNextPageToken() == "" {
			return out
		}
		token = resp.GetNextPageToken()
	}
}
