package gate_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	"github.com/readstate/receipts/pkg/kinds/heads"
	memberkind "github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redistest"
)

// Group mentions over REST, gRPC and Connect: a mention_all notice counts
// as a mention for every member but its sender whose level is all or
// mentions (muted or not), never at none; a message both named and
// group-mentioned counts once; the count caps; the badge follows; and
// once the persister has them, the counts survive the loss of every
// Redis key.
func TestGroupMentionsCountForMembersButTheSender(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.MentionCap = 3 }})
	startPersister(t, tb)
	ctx := context.Background()
	connectCl, grpcCl := tb.client(), tb.client(connect.WithGRPC())
	for _, u := range []string{"s", "a", "m", "n"} {
		tb.ok(t, http.MethodPut, "/v1/channels/gc/members/"+u, `{}`)
	}
	tb.ok(t, http.MethodPut, "/v1/users/m/channels/gc/notifications", `{"level": "mentions"}`)
	tb.ok(t, http.MethodPut, "/v1/users/n/channels/gc/notifications", `{"level": "none"}`)
	_, err := grpcCl.SetNotifications(ctx, connect.NewRequest(&receiptsv1.SetNotificationsRequest{UserId: "a", ChannelId: "gc",
		MutedUntilUnixMs: time.Now().Add(time.Hour).UnixMilli()}))
	require.NoError(t, err)

	type counts struct {
		unread, mentions int64
		capped           bool
	}
	countsOf := func(u string) counts {
		t.Helper()
		resp, err := connectCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: u, ChannelId: []string{"gc"}}))
		require.NoError(t, err)
		c := resp.Msg.GetChannels()[0]
		all, err := grpcCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: u}))
		require.NoError(t, err)
		require.Equal(t, c.GetMentionCount(), all.Msg.GetChannels()[0].GetMentionCount(), "the default set counts alike")
		lr, err := grpcCl.LookupReceipts(ctx, connect.NewRequest(&receiptsv1.LookupReceiptsRequest{BadgeUserIds: []string{u}}))
		require.NoError(t, err)
		if u != "n" {
			require.Equal(t, c.GetMentionCount(), lr.Msg.GetBadges()[0].GetMentionTotal(), "the badge counts them")
		}
		require.Equal(t, all.Msg.GetMentionTotal(), lr.Msg.GetBadges()[0].GetMentionTotal())
		return counts{c.GetUnreadCount(), c.GetMentionCount(), c.GetMentionsCapped()}
	}
	everyone := func() map[string]counts {
		out := map[string]counts{}
		for _, u := range []string{"s", "a", "m", "n"} {
			out[u] = countsOf(u)
		}
		return out
	}

	// REST: s group-mentions the channel.
	tb.ok(t, http.MethodPost, "/v1/channels/gc/messages", `{"seq": 1, "sender_id": "s", "mention_all": true}`)
	require.Equal(t, map[string]counts{
		"s": {0, 0, false}, "a": {1, 1, false}, "m": {1, 1, false}, "n": {1, 0, false},
	}, everyone(), "the sender and a member at none are not mentioned; a muted member is")

	// The sender reads it as unread again: still not mentioned by it.
	_, err = connectCl.MarkUnread(ctx, connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: "s", ChannelId: "gc", Seq: 1}))
	require.NoError(t, err)
	require.Equal(t, counts{1, 0, false}, countsOf("s"))

	// Connect (batch): a group-mentions; gRPC: x group-mentions and names m.
	_, err = connectCl.NotifyMessages(ctx, connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
		{ChannelId: "gc", Seq: 2, SenderId: "a", MentionAll: true},
	}}))
	require.NoError(t, err)
	_, err = grpcCl.NotifyMessage(ctx, connect.NewRequest(&receiptsv1.NotifyMessageRequest{ChannelId: "gc", Seq: 3, SenderId: "x",
		MentionAll: true, Mentions: []string{"m"}}))
	require.NoError(t, err)
	require.Equal(t, map[string]counts{
		"s": {3, 2, false}, "a": {1, 1, false}, "m": {3, 3, false}, "n": {3, 0, false},
	}, everyone(), "seq 3, named and group-mentioned, counts once for m")

	// Past the cap (3): capped.
	for seq := int64(4); seq <= 5; seq++ {
		_, err = grpcCl.NotifyMessage(ctx, connect.NewRequest(&receiptsv1.NotifyMessageRequest{ChannelId: "gc", Seq: seq, SenderId: "x", MentionAll: true}))
		require.NoError(t, err)
	}
	want := map[string]counts{"s": {5, 3, true}, "a": {3, 3, false}, "m": {5, 3, true}, "n": {5, 0, false}}
	require.Equal(t, want, everyone())
	require.LessOrEqual(t, tb.rdb.ZCard(ctx, groupmentions.NewStore(nil, tb.store).RedisKey("gc")).Val(), int64(3+1), "Redis keeps the newest cap+1")

	// Once the persister has them, Redis loses everything: the counts come
	// back from Postgres.
	require.Eventually(t, func() bool {
		gms, err := groupmentions.NewStore(tb.schema.Store, nil).WithMentionCap(3).ReadPG(ctx, []string{"gc"})
		require.NoError(t, err)
		return len(gms) == 1 && len(gms[0].Mentions) == 4 && gms[0].Mentions[3].Seq == 5
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the group mentions")
	require.Eventually(t, func() bool {
		st, err := cursors.NewPostgres(tb.schema.Store).Get(ctx, "s", []string{"gc"})
		require.NoError(t, err)
		return len(st) == 1 && st[0].EffectiveRead().Seq == 0 && st[0].EffectiveRead().Epoch > 0
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the mark-unread")
	redistest.DeletePrefix(ctx, tb.rdb, tb.prefix)
	require.Empty(t, tb.redisKeys(t))
	require.Equal(t, want, everyone(), "rebuilt from Postgres")
	require.Contains(t, tb.redisKeys(t), groupmentions.NewStore(nil, tb.store).RedisKey("gc"), "the read hydrated Redis")
}

// A group mention's storage does not grow with the channel's members: a
// channel of 2,000 members keeps one Redis member and one Postgres row.
func TestGroupMentionStorageDoesNotGrowWithMembers(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	startPersister(t, tb)
	ctx := context.Background()
	const members = 2000
	regs := make([]channel.Membership, members)
	for i := range regs {
		regs[i] = channel.Join(receipt.Key{User: "u" + strconv.Itoa(i), Channel: "big"}, 1, 1, 0)
	}
	_, err := memberkind.NewStore(nil, tb.store).MergeMemberships(ctx, regs)
	require.NoError(t, err)
	_, err = memberkind.NewStore(tb.schema.Store, nil).WritePG(ctx, regs)
	require.NoError(t, err)
	before := map[string]bool{}
	for _, k := range tb.redisKeys(t) {
		before[k] = true
	}

	_, err = tb.client().NotifyMessage(ctx, connect.NewRequest(&receiptsv1.NotifyMessageRequest{ChannelId: "big", Seq: 1, SenderId: "u0", MentionAll: true}))
	require.NoError(t, err)
	require.Equal(t, int64(1), tb.rdb.ZCard(ctx, groupmentions.NewStore(nil, tb.store).RedisKey("big")).Val())
	var added []string
	for _, k := range tb.redisKeys(t) {
		if !before[k] {
			added = append(added, k)
		}
	}
	for _, k := range added {
		// (and the incarnation marker, one per Redis: restore.go)
		require.True(t, strings.Contains(k, "{big}") || strings.Contains(k, "{u0}") || k == tb.store.IncarnationKey(k), "only the channel's and the sender's keys: %v", added)
	}
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, tb.schema.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM channel_group_mentions`).Scan(&n))
		return n == 1
	}, 15*time.Second, 20*time.Millisecond)
	var mentionRows int
	require.NoError(t, tb.schema.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM mentions`).Scan(&mentionRows))
	require.Zero(t, mentionRows, "no mention row per member")

	for _, u := range []string{"u1", "u1999"} {
		resp, err := tb.client().GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: u, ChannelId: []string{"big"}}))
		require.NoError(t, err)
		require.Equal(t, int64(1), resp.Msg.GetChannels()[0].GetMentionCount(), u)
	}
}

// mention_all is not for thread replies: refused, nothing written.
func TestGroupMentionOfAThreadReplyRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	_, err := tb.client().NotifyMessages(context.Background(), connect.NewRequest(&receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
		{ChannelId: "c", Seq: 2, ThreadRootSeq: 1, MentionAll: true},
	}}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidField, "thread reply")
	require.Empty(t, tb.redisKeys(t))
}

// Without Redis, the counts come from Postgres alone by the same rule.
func TestGroupMentionsCountFromPostgresAlone(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = down.Close() })
	tb := setup(t, setupOpts{redis: down})
	ctx := context.Background()
	pg := tb.schema.Store
	_, err := heads.NewStore(pg, nil).WritePG(ctx, []channel.Head{{Channel: "gc", Seq: 5, UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	var regs []channel.Membership
	var states []receipt.State
	for _, u := range []string{"s", "a", "m", "n"} {
		k := receipt.Key{User: u, Channel: "gc"}
		regs = append(regs, channel.Join(k, 1, 1, 0))
		states = append(states, receipt.State{Key: k, Read: receipt.Cursor{Position: pos(1)}, Delivered: receipt.Cursor{Position: pos(1)}, UpdatedAtUnixMs: 1})
	}
	_, err = memberkind.NewStore(pg, nil).WritePG(ctx, regs)
	require.NoError(t, err)
	_, err = cursors.NewPostgres(pg).Upsert(ctx, states)
	require.NoError(t, err)
	_, err = notifications.NewStore(pg, nil).WritePG(ctx, []notification.Register{
		{Key: receipt.Key{User: "m", Channel: "gc"}, Level: notification.Mentions, VersionUnixMs: 1},
		{Key: receipt.Key{User: "n", Channel: "gc"}, Level: notification.None, VersionUnixMs: 1},
	})
	require.NoError(t, err)
	_, err = mentions.NewStore(pg, nil).WritePG(ctx, []channel.Mentions{{Key: receipt.Key{User: "m", Channel: "gc"}, Seqs: []int64{3}}})
	require.NoError(t, err)
	_, err = groupmentions.NewStore(pg, nil).WritePG(ctx, []channel.GroupMentions{{Channel: "gc", Mentions: []channel.GroupMention{{Seq: 2, Sender: "s"}, {Seq: 3, Sender: "x"}, {Seq: 4, Sender: "a"}}}})
	require.NoError(t, err)

	mentions := func() map[string]int64 {
		t.Helper()
		got := map[string]int64{}
		for _, u := range []string{"s", "a", "m", "n"} {
			resp, err := tb.client().GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: u}))
			require.NoError(t, err)
			got[u] = resp.Msg.GetChannels()[0].GetMentionCount()
		}
		return got
	}
	require.Equal(t, map[string]int64{"s": 2, "a": 2, "m": 3, "n": 0}, mentions())

	// Deleted messages stop counting as mentions, group or explicit.
	_, err = deletions.NewStore(pg, nil).WritePG(ctx, []channel.Deletions{{Channel: "gc", Seqs: []int64{3, 4}}})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"s": 0, "a": 1, "m": 1, "n": 0}, mentions())
	require.Positive(t, tb.metric(t, "receipts_kafkagate_read_fallbacks_total", "reason", "redis_error"))
}
