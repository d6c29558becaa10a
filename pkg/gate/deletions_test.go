package gate_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/thread"
)

// Deleted messages stop counting, over REST, gRPC and Connect: in the
// unread count, the first unread seq, the mention count and the badge
// totals (GetUnread and LookupReceipts alike); a delete before its notice
// applies, a repeat changes nothing, cursors stay where they were, and
// the counts are the same from Postgres alone and after Redis loses every
// key.
func TestDeletedMessagesStopCounting(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	startPersister(t, tb)
	ctx := context.Background()
	connectCl, grpcCl := tb.client(), tb.client(connect.WithGRPC())
	tb.ok(t, http.MethodPut, "/v1/channels/dc/members/bob", `{}`)
	var notices []string
	for seq := 1; seq <= 10; seq++ {
		n := `{"channel_id": "dc", "seq": ` + strconv.Itoa(seq) + `, "sender_id": "alice"`
		if seq == 7 {
			n += `, "mentions": ["bob"]`
		}
		notices = append(notices, n+"}")
	}
	tb.ok(t, http.MethodPost, "/v1/messages:notify", `{"notices": [`+strings.Join(notices, ",")+`]}`)

	type counts struct{ unread, first, mentions, head, read int64 }
	get := func() counts {
		t.Helper()
		resp, err := connectCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "bob"}))
		require.NoError(t, err)
		require.Len(t, resp.Msg.GetChannels(), 1)
		c := resp.Msg.GetChannels()[0]
		got := counts{c.GetUnreadCount(), c.GetFirstUnreadSeq(), c.GetMentionCount(), c.GetHead().GetSeq(), c.GetRead().GetSeq()}
		require.Equal(t, badge{got.unread, min(got.unread, 1), got.mentions}, badge{resp.Msg.GetUnreadTotal(), resp.Msg.GetChannelsWithUnread(), resp.Msg.GetMentionTotal()})
		lr, err := grpcCl.LookupReceipts(ctx, connect.NewRequest(&receiptsv1.LookupReceiptsRequest{BadgeUserIds: []string{"bob"}}))
		require.NoError(t, err)
		b := lr.Msg.GetBadges()[0]
		require.Equal(t, badge{got.unread, min(got.unread, 1), got.mentions}, badge{b.GetUnreadTotal(), b.GetChannelsWithUnread(), b.GetMentionTotal()}, "the badge agrees")
		var r receiptsv1.GetUnreadResponse
		tb.doProto(t, http.MethodGet, "/v1/users/bob/unread", "", &r)
		require.Equal(t, got.unread, r.GetChannels()[0].GetUnreadCount(), "the fast REST path agrees")
		require.Equal(t, got.first, r.GetChannels()[0].GetFirstUnreadSeq())
		return got
	}
	require.Equal(t, counts{10, 1, 1, 10, 0}, get())

	// 7 (REST) and 9 (gRPC): the mention at 7 goes with it.
	tb.ok(t, http.MethodDelete, "/v1/channels/dc/messages/7", "")
	del, err := grpcCl.DeleteMessage(ctx, connect.NewRequest(&receiptsv1.DeleteMessageRequest{ChannelId: "dc", Seq: 9}))
	require.NoError(t, err)
	require.Equal(t, receiptsv1.Durability_KAFKA, del.Msg.GetDurability())
	require.False(t, del.Msg.GetRealtimeDegraded())
	require.Equal(t, counts{8, 1, 0, 10, 0}, get())

	// 1 in a notice batch (Connect): the first unread skips it. 12 before
	// its notice, then 11 and 12 notified.
	res, err := connectCl.NotifyMessages(ctx, connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
		{ChannelId: "dc", Seq: 1, Deleted: true}, {ChannelId: "dc", Seq: 12, Deleted: true},
	}}))
	require.NoError(t, err)
	require.Equal(t, receiptsv1.Durability_KAFKA, res.Msg.GetResults()[1].GetDurability())
	require.Equal(t, counts{7, 2, 0, 10, 0}, get())
	tb.ok(t, http.MethodPost, "/v1/messages:notify", `{"notices": [{"channel_id": "dc", "seq": 11}, {"channel_id": "dc", "seq": 12}]}`)
	want := counts{8, 2, 0, 12, 0}
	require.Equal(t, want, get(), "a delete before its notice applies")

	// A repeat, over every protocol: nothing changes.
	tb.ok(t, http.MethodDelete, "/v1/channels/dc/messages/7", "")
	_, err = connectCl.DeleteMessage(ctx, connect.NewRequest(&receiptsv1.DeleteMessageRequest{ChannelId: "dc", Seq: 12}))
	require.NoError(t, err)
	require.Equal(t, want, get())

	// From Postgres alone (once the persister has the deletions), and
	// after Redis loses every key: the same counts.
	require.Eventually(t, func() bool {
		ds, err := deletions.NewStore(tb.schema.Store, nil).ReadPG(ctx, []thread.Ref{{Channel: "dc"}})
		require.NoError(t, err)
		return len(ds) == 1 && len(ds[0].Seqs) == 4
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the deletions")
	require.Eventually(t, func() bool {
		vs, err := gate.DurableUnread(ctx, tb.gate, "bob")
		require.NoError(t, err)
		return len(vs) == 1 && vs[0].Head.Seq == 12 && vs[0].Unread == 8 && vs[0].FirstUnread == 2 && vs[0].Mentions == 0
	}, 15*time.Second, 20*time.Millisecond, "the Postgres fallback counts as Redis does")
	redistest.DeletePrefix(ctx, tb.rdb, tb.prefix)
	require.Empty(t, tb.redisKeys(t))
	require.Equal(t, want, get(), "rebuilt from Postgres")
	require.Contains(t, tb.redisKeys(t), deletions.NewStore(nil, tb.store).RedisKey(thread.Ref{Channel: "dc"}), "the read hydrated the deletions")

	// A read moves as before: to 8, the unread are 10 and 11.
	tb.ok(t, http.MethodPost, "/v1/users/bob/channels/dc/read", `{"seq": 8}`)
	require.Equal(t, counts{2, 10, 0, 12, 8}, get())
}

// Bad deletes are refused with their reason and write nothing.
func TestDeleteBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	status, body := tb.do(t, http.MethodDelete, "/v1/channels/dc/messages/0", "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidSeq, "seq 0")
	_, err := tb.client(connect.WithGRPC()).DeleteMessage(ctx, connect.NewRequest(&receiptsv1.DeleteMessageRequest{ChannelId: "a b", Seq: 1}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidID, "grpc")
	_, err = tb.client().NotifyMessages(ctx, connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
		{ChannelId: "dc", Seq: 3, Deleted: true, Mentions: []string{"bob"}}}}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidField, "connect")
	require.Empty(t, tb.redisKeys(t))
	require.Zero(t, tb.highWatermarks(t))
}

// Without Postgres, a channel whose deletions Redis does not know yet
// still answers (without them), and one whose deletions Redis knows
// counts them: the deletions cost Postgres nothing once hydrated.
func TestDeletionsWithPostgresDown(t *testing.T) {
	t.Parallel()
	pg, err := pgstore.Open(context.Background(), pgstore.Config{URL: "postgres://postgres@" + closedAddr(t) + "/receipts?sslmode=disable&connect_timeout=1"})
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Postgres = pg }})
	ctx := context.Background()
	var regs []channel.Membership
	var ms []channel.Mentions
	for _, ch := range []string{"known", "unknown"} {
		k := receipt.Key{User: "pu", Channel: ch}
		regs = append(regs, channel.Join(k, 1, 1, 0))
		ms = append(ms, channel.Mentions{Key: k, Seqs: []int64{4}})
		_, err := heads.NewStore(nil, tb.store).RaiseRedis(ctx, []channel.Head{{Channel: ch, Seq: 6, MessageID: "m6"}})
		require.NoError(t, err)
	}
	require.NoError(t, cursors.NewStore(tb.store).Hydrate(ctx, "pu", nil, redisstore.Incarnation{}))
	require.NoError(t, mentions.NewStore(nil, tb.store).HydrateRedis(ctx, "pu", ms))
	require.NoError(t, members.NewStore(nil, tb.store).HydrateMemberships(ctx, "pu", regs))
	require.NoError(t, threads.NewStore(nil, tb.store).HydrateUser(ctx, "pu", nil, redisstore.Incarnation{}))
	require.NoError(t, tb.notifications().Hydrate(ctx, "pu", nil))
	_, err = settings.NewStore(nil, tb.store).MergeRedis(ctx, []privacy.Settings{{User: "pu", ShareRead: true, ShareDelivered: true, VersionMs: 1}})
	require.NoError(t, err)
	require.NoError(t, deletions.NewStore(nil, tb.store).HydrateRedis(ctx, []thread.Ref{{Channel: "known"}}, nil))
	_, err = deletions.NewStore(nil, tb.store).AddRedis(ctx, []channel.Deletions{{Channel: "known", Seqs: []int64{1, 4}}, {Channel: "unknown", Seqs: []int64{1, 4}}})
	require.NoError(t, err)

	resp, err := tb.client().GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "pu"}))
	require.NoError(t, err)
	got := map[string][3]int64{}
	for _, c := range resp.Msg.GetChannels() {
		got[c.GetChannelId()] = [3]int64{c.GetUnreadCount(), c.GetFirstUnreadSeq(), c.GetMentionCount()}
	}
	require.Equal(t, map[string][3]int64{"known": {4, 2, 0}, "unknown": {6, 1, 1}}, got)
}

// Hostile deletes do no lasting damage: a seq past 2^53−1 is refused, one
// far beyond the head (another id space, a typo) is refused with its own
// reason and drops no other deletion; at the very top of the exact range
// the counts still work and Redis keeps answering.
func TestHostileDeletesChangeNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	cl := tb.client()
	tb.ok(t, http.MethodPut, "/v1/channels/hc/members/bob", `{}`)
	var notices []string
	for seq := 1; seq <= 20; seq++ {
		notices = append(notices, `{"channel_id": "hc", "seq": `+strconv.Itoa(seq)+`, "sender_id": "alice"}`)
	}
	tb.ok(t, http.MethodPost, "/v1/messages:notify", `{"notices": [`+strings.Join(notices, ",")+`]}`)
	tb.ok(t, http.MethodDelete, "/v1/channels/hc/messages/3", "")
	tb.ok(t, http.MethodDelete, "/v1/channels/hc/messages/5", "")
	unread := func(ch string) int64 {
		t.Helper()
		resp, err := cl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "bob", ChannelId: []string{ch}}))
		require.NoError(t, err)
		return resp.Msg.GetChannels()[0].GetUnreadCount()
	}
	require.Equal(t, int64(18), unread("hc"))

	status, body := tb.do(t, http.MethodDelete, "/v1/channels/hc/messages/9223372036854775807", "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidSeq, "9007199254740991")
	status, body = tb.do(t, http.MethodDelete, "/v1/channels/hc/messages/"+strconv.FormatInt(receipt.MaxSeq, 10), "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.DeletionBeyondHead, "beyond the head 20")
	_, err := cl.NotifyMessages(ctx, connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
		{ChannelId: "hc", Seq: 21 + channel.DeletionLead, Deleted: true}}}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.DeletionBeyondHead, "a batch")
	_, err = cl.DeleteThreadReply(ctx, connect.NewRequest(&receiptsv1.DeleteThreadReplyRequest{ChannelId: "hc", RootSeq: 2, Seq: 1_000_000}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.DeletionBeyondHead, "a thread's head")
	tb.ok(t, http.MethodDelete, "/v1/channels/hc/messages/"+strconv.Itoa(20+channel.DeletionLead), "") // as far ahead as a delete may run
	require.Equal(t, int64(18), unread("hc"), "every deletion still counts")
	sets, err := deletions.NewStore(nil, tb.store).ReadRedis(ctx, []thread.Ref{{Channel: "hc"}})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 5, 20 + channel.DeletionLead}, sets[0])

	// The top of the exact range: a head at 2^53−1, a read 10 below it, a
	// deletion right after the read.
	top := receipt.MaxSeq
	tb.ok(t, http.MethodPut, "/v1/channels/top/members/bob", `{}`)
	tb.ok(t, http.MethodPost, "/v1/messages:notify", `{"notices": [{"channel_id": "top", "seq": `+strconv.FormatInt(top, 10)+`, "sender_id": "alice"}]}`)
	tb.ok(t, http.MethodPost, "/v1/receipts:mark", `{"receipts": [{"user_id": "bob", "channel_id": "top", "seq": `+strconv.FormatInt(top-10, 10)+`, "kind": "READ"}]}`)
	for _, q := range []int64{top - 9, top - 8} {
		tb.ok(t, http.MethodDelete, "/v1/channels/top/messages/"+strconv.FormatInt(q, 10), "")
	}
	resp, err := cl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "bob", ChannelId: []string{"top"}}))
	require.NoError(t, err)
	c := resp.Msg.GetChannels()[0]
	require.Equal(t, [2]int64{8, top - 7}, [2]int64{c.GetUnreadCount(), c.GetFirstUnreadSeq()})
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.NoError(t, tb.rdb.Ping(pctx).Err(), "Redis answers within a second")
}

// A deletion set too large for a read to copy (past the inline budget)
// is copied into Redis in the background, in pages; the reads meanwhile
// answer Postgres' counts, which read the counts and the run after the
// read, not the set. Once the copy is done, Redis answers alone.
func TestLargeDeletionSetIsCopiedOffTheReadPath(t *testing.T) {
	t.Parallel()
	// About bounds, not speed: Postgres' counts of a 30,000-seq run can
	// pass the 2 s default under a loaded CI.
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.PostgresTimeout = 30 * time.Second }})
	startPersister(t, tb)
	ctx := context.Background()
	const head, deleted = 60_000, 30_000
	tb.ok(t, http.MethodPut, "/v1/channels/big/members/bob", `{}`)
	tb.ok(t, http.MethodPost, "/v1/messages:notify", `{"notices": [{"channel_id": "big", "seq": `+strconv.Itoa(head)+`}]}`)
	require.Eventually(t, func() bool {
		hs, err := heads.NewStore(tb.schema.Store, nil).ReadPG(ctx, []string{"big"})
		require.NoError(t, err)
		ms, err := members.NewStore(tb.schema.Store, nil).ReadPG(ctx, "bob", []string{"big"})
		require.NoError(t, err)
		return len(hs) == 1 && hs[0].Seq == head && len(ms) == 1
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the head and the membership")
	// Seqs 1..30,000 deleted (a run right after bob's read at 0), written
	// to Postgres only, then Redis loses everything.
	seqs := make([]int64, deleted)
	for i := range seqs {
		seqs[i] = int64(i + 1)
	}
	_, err := deletions.NewStore(tb.schema.Store, nil).WritePG(ctx, []channel.Deletions{{Channel: "big", Seqs: seqs}})
	require.NoError(t, err)
	redistest.DeletePrefix(ctx, tb.rdb, tb.prefix)

	cl := tb.client()
	get := func() (unread, first int64) {
		t.Helper()
		resp, err := cl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "bob"}))
		require.NoError(t, err)
		require.Len(t, resp.Msg.GetChannels(), 1)
		c := resp.Msg.GetChannels()[0]
		return c.GetUnreadCount(), c.GetFirstUnreadSeq()
	}
	u, f := get()
	require.Equal(t, [2]int64{head - deleted, deleted + 1}, [2]int64{u, f}, "the first read counts from Postgres")
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_read_fallbacks_total", "reason", "hydrating"), "the set was not copied by the read")
	require.Eventually(t, func() bool {
		n, err := tb.rdb.ZCard(ctx, deletions.NewStore(nil, tb.store).RedisKey(thread.Ref{Channel: "big"})).Result()
		require.NoError(t, err)
		return n == deleted
	}, 15*time.Second, 20*time.Millisecond, "the background copy brought the whole set")
	require.Eventually(t, func() bool {
		before := tb.metric(t, "receipts_kafkagate_read_fallbacks_total", "reason", "hydrating")
		u, f := get()
		require.Equal(t, [2]int64{head - deleted, deleted + 1}, [2]int64{u, f})
		return tb.metric(t, "receipts_kafkagate_read_fallbacks_total", "reason", "hydrating") == before
	}, 15*time.Second, 20*time.Millisecond, "once copied (the last page marks the set known), Redis answers alone")
}
