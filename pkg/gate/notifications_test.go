package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redistest"
)

// badge is the totals GetUnread and a LookupReceipts badge answer.
type badge struct{ unread, channels, mentions int64 }

// Notification levels over REST, gRPC and Connect: a channel's level and
// mute change what it adds to the badge (GetUnread's totals and
// LookupReceipts' badges alike), never its own counts; a mute ends by
// itself; the user's default level applies to channels without their own;
// and once the persister has them, the levels survive the loss of every
// Redis key.
func TestNotificationLevelsShapeTheBadge(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	startPersister(t, tb)
	ctx := context.Background()
	connectCl, grpcCl := tb.client(), tb.client(connect.WithGRPC())
	// Channel a: 3 unread; b: 2 unread, one a mention; c: 4 unread.
	for _, ch := range []string{"na", "nb", "nc"} {
		tb.ok(t, http.MethodPut, "/v1/channels/"+ch+"/members/nu", `{}`)
	}
	tb.ok(t, http.MethodPost, "/v1/channels/na/messages", `{"seq": 3, "sender_id": "x"}`)
	tb.ok(t, http.MethodPost, "/v1/channels/nb/messages", `{"seq": 2, "sender_id": "x", "mentions": ["nu"]}`)
	tb.ok(t, http.MethodPost, "/v1/channels/nc/messages", `{"seq": 4, "sender_id": "x"}`)

	unread := func() (*receiptsv1.GetUnreadResponse, map[string]*receiptsv1.ChannelUnread) {
		t.Helper()
		resp, err := connectCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "nu"}))
		require.NoError(t, err)
		byCh := map[string]*receiptsv1.ChannelUnread{}
		for _, c := range resp.Msg.GetChannels() {
			byCh[c.GetChannelId()] = c
		}
		return resp.Msg, byCh
	}
	// bothBadges is GetUnread's badge, then LookupReceipts'.
	bothBadges := func() (badge, badge) {
		t.Helper()
		u, _ := unread()
		got := badge{u.GetUnreadTotal(), u.GetChannelsWithUnread(), u.GetMentionTotal()}
		lr, err := grpcCl.LookupReceipts(ctx, connect.NewRequest(&receiptsv1.LookupReceiptsRequest{BadgeUserIds: []string{"nu"}}))
		require.NoError(t, err)
		b := lr.Msg.GetBadges()[0]
		return got, badge{b.GetUnreadTotal(), b.GetChannelsWithUnread(), b.GetMentionTotal()}
	}
	totals := func() badge {
		t.Helper()
		got, lookup := bothBadges()
		require.Equal(t, got, lookup, "LookupReceipts' badge agrees with GetUnread")
		return got
	}
	levelsOf := func() map[string]string {
		t.Helper()
		_, byCh := unread()
		out := map[string]string{}
		for ch, c := range byCh {
			out[ch] = fmt.Sprintf("%s muted=%v unread=%d", c.GetLevel(), c.GetMuted(), c.GetUnreadCount())
		}
		return out
	}
	require.Equal(t, badge{9, 3, 1}, totals())
	require.Equal(t, map[string]string{"na": "all muted=false unread=3", "nb": "all muted=false unread=2", "nc": "all muted=false unread=4"}, levelsOf())

	// a at none (REST), b at mentions (gRPC): only c's messages count,
	// b's mention still does.
	var set receiptsv1.ChannelNotifications
	tb.doProto(t, http.MethodPut, "/v1/users/nu/channels/na/notifications", `{"level": "none"}`, &set)
	require.Equal(t, "none", set.GetNotifications().GetLevel())
	require.Positive(t, set.GetNotifications().GetVersionUnixMs(), "Redis versioned it")
	require.Equal(t, receiptsv1.Durability_KAFKA, set.GetDurability())
	_, err := grpcCl.SetNotifications(ctx, connect.NewRequest(&receiptsv1.SetNotificationsRequest{UserId: "nu", ChannelId: "nb", Level: "mentions"}))
	require.NoError(t, err)
	require.Equal(t, badge{4, 1, 1}, totals())
	require.Equal(t, map[string]string{"na": "none muted=false unread=3", "nb": "mentions muted=false unread=2", "nc": "all muted=false unread=4"}, levelsOf(),
		"a channel's own counts never change with its level")
	var restUnread receiptsv1.GetUnreadResponse
	tb.doProto(t, http.MethodGet, "/v1/users/nu/unread", "", &restUnread)
	require.Equal(t, int64(4), restUnread.GetUnreadTotal(), "the fast REST path counts by level too")
	require.Equal(t, "none", restUnread.GetChannels()[0].GetLevel(), "and carries the level")

	// c muted for a few seconds (Connect): nothing but b's mention counts,
	// until the mute ends by itself.
	until := time.Now().Add(3 * time.Second).UnixMilli()
	muted, err := connectCl.SetNotifications(ctx, connect.NewRequest(&receiptsv1.SetNotificationsRequest{UserId: "nu", ChannelId: "nc", MutedUntilUnixMs: until}))
	require.NoError(t, err)
	require.Equal(t, until, muted.Msg.GetNotifications().GetMutedUntilUnixMs())
	u, byCh := unread()
	if time.Now().UnixMilli() < until { // a loaded machine may have spent the mute already
		require.Equal(t, badge{0, 0, 1}, badge{u.GetUnreadTotal(), u.GetChannelsWithUnread(), u.GetMentionTotal()})
		require.True(t, byCh["nc"].GetMuted())
		require.Equal(t, until, byCh["nc"].GetMutedUntilUnixMs())
	}
	// Both calls must see the end; one may fall before it, one after.
	require.Eventually(t, func() bool {
		got, lookup := bothBadges()
		return got == badge{4, 1, 1} && lookup == got
	}, 15*time.Second, 50*time.Millisecond, "the mute ends by itself, in both calls")

	// The later of two calls wins, however close together.
	for _, level := range []string{"all", "mentions", "none"} {
		_, err := connectCl.SetNotifications(ctx, connect.NewRequest(&receiptsv1.SetNotificationsRequest{UserId: "nu", ChannelId: "na", Level: level}))
		require.NoError(t, err)
	}
	require.Equal(t, "none muted=false unread=3", levelsOf()["na"])

	// The user's default: c, without a level of its own, follows it.
	var st receiptsv1.UserSettings
	tb.doProto(t, http.MethodPut, "/v1/users/nu/settings", `{"default_notification_level": "mentions"}`, &st)
	require.Equal(t, "mentions", st.GetDefaultNotificationLevel())
	require.True(t, st.GetShareReadReceipts(), "the other settings keep their value")
	require.Equal(t, badge{0, 0, 1}, totals())
	require.Equal(t, "mentions muted=false unread=4", levelsOf()["nc"])

	// Once the persister has every register, Redis loses everything: the
	// levels and the default come back from Postgres.
	require.Eventually(t, func() bool {
		regs, err := tb.notifications().ReadPG(ctx, "nu", nil)
		require.NoError(t, err)
		sts, err := settings.NewStore(tb.schema.Store, nil).ReadPG(ctx, []string{"nu"})
		require.NoError(t, err)
		return len(regs) == 3 && regs[0].Level == notification.None && regs[1].Level == notification.Mentions &&
			regs[2].MutedUntilUnixMs == until && sts[0].DefaultLevel == notification.Mentions
	}, 15*time.Second, 20*time.Millisecond, "the persister wrote the registers and the default")
	want := levelsOf()
	redistest.DeletePrefix(ctx, tb.rdb, tb.prefix)
	require.Empty(t, tb.redisKeys(t))
	require.Equal(t, want, levelsOf(), "rebuilt from Postgres")
	require.Equal(t, badge{0, 0, 1}, totals())
	require.Contains(t, tb.redisKeys(t), tb.notifications().RedisKey("nu"), "the read hydrated Redis")
	got, err := connectCl.GetSettings(ctx, connect.NewRequest(&receiptsv1.GetSettingsRequest{UserId: "nu"}))
	require.NoError(t, err)
	require.Equal(t, "mentions", got.Msg.GetDefaultNotificationLevel())
}

// Bad notification input is refused with its reason over every protocol,
// and nothing is written.
func TestNotificationBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	for _, c := range []struct {
		name, method, path, body string
		reason                   apierr.Reason
		msg                      string
	}{
		{"unknown level", "PUT", "/v1/users/u/channels/c/notifications", `{"level": "loud"}`, apierr.InvalidLevel, `level: must be all, mentions, none or empty, got "loud"`},
		{"negative mute", "PUT", "/v1/users/u/channels/c/notifications", `{"muted_until_unix_ms": -1}`, apierr.InvalidField, "muted_until_unix_ms: must be between 0 and 9007199254740991, got -1"},
		{"bad user", "PUT", "/v1/users/a%20b/channels/c/notifications", `{"level": "all"}`, apierr.InvalidID, "user_id: contains whitespace at byte 1"},
		{"bad channel", "PUT", "/v1/users/u/channels/c%09/notifications", `{"level": "all"}`, apierr.InvalidID, "channel_id: contains whitespace at byte 1"},
		{"unknown default", "PUT", "/v1/users/u/settings", `{"default_notification_level": "loud"}`, apierr.InvalidLevel, `default_notification_level: must be all, mentions or none, got "loud"`},
		{"empty default", "PUT", "/v1/users/u/settings", `{"default_notification_level": ""}`, apierr.InvalidLevel, `got ""`},
	} {
		status, body := tb.do(t, c.method, c.path, c.body)
		apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, c.reason, c.name)
		require.Contains(t, parseRESTError(t, body).Message, c.msg, c.name)
	}
	ctx := context.Background()
	for name, cl := range map[string]func() error{
		"grpc": func() error {
			_, err := tb.client(connect.WithGRPC()).SetNotifications(ctx, connect.NewRequest(&receiptsv1.SetNotificationsRequest{UserId: "u", ChannelId: "c", Level: "ALL"}))
			return err
		},
		"connect": func() error {
			_, err := tb.client().SetNotifications(ctx, connect.NewRequest(&receiptsv1.SetNotificationsRequest{UserId: "u", ChannelId: "c", Level: "all", MutedUntilUnixMs: -5}))
			return err
		},
	} {
		err := cl()
		reason := apierr.InvalidLevel
		if name == "connect" {
			reason = apierr.InvalidField
		}
		apierrtest.Refused(t, err, connect.CodeInvalidArgument, reason, name)
	}
	require.Empty(t, tb.redisKeys(t))
	require.Zero(t, tb.highWatermarks(t))
}

// An erasure takes the user's notification registers with it, in Redis
// at once (the levels read back as the defaults) and in Postgres.
func TestErasureRemovesNotificationLevels(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	cl := tb.client()
	_, err := cl.SetNotifications(ctx, connect.NewRequest(&receiptsv1.SetNotificationsRequest{UserId: "eu", ChannelId: "ec", Level: "none", MutedUntilUnixMs: time.Now().Add(time.Hour).UnixMilli()}))
	require.NoError(t, err)
	_, err = tb.notifications().WritePG(ctx, []notification.Register{{Key: receipt.Key{User: "eu", Channel: "ec"}, Level: notification.None, VersionUnixMs: 1}})
	require.NoError(t, err) // as the persister would have
	level := func() string {
		t.Helper()
		resp, err := cl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "eu", ChannelId: []string{"ec"}}))
		require.NoError(t, err)
		c := resp.Msg.GetChannels()[0]
		return fmt.Sprintf("%s muted=%v", c.GetLevel(), c.GetMuted())
	}
	require.Equal(t, "none muted=true", level())

	_, err = cl.EraseUser(ctx, connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: "eu"}))
	require.NoError(t, err)
	require.Equal(t, "all muted=false", level())
	regs, err := tb.notifications().ReadPG(ctx, "eu", nil)
	require.NoError(t, err)
	require.Empty(t, regs)
}

// notifications is the notification registers' storage on the test's
// stores.
func (tb *testBundle) notifications() notifications.Store {
	return notifications.NewStore(tb.schema.Store, tb.store)
}
