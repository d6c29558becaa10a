package gate

import (
	"context"
	"fmt"
	"math"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/notifications"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

// SetNotifications implements receiptsv1connect.ReceiptServiceHandler.
// The register's version is Redis' clock, above the stored one
// (notifications.Store.Change), so two calls apply in their order
// whatever the gateways' clocks; without Redis it is the gateway's clock.
// The event, stamped with the erasure generation the write read, is made
// durable before the answer, as a membership change's.
func (g *Gate) SetNotifications(ctx context.Context, req *connect.Request[receiptsv1.SetNotificationsRequest]) (*connect.Response[receiptsv1.ChannelNotifications], error) {
	r := req.Msg
	k, err := seam.ValidateKey(r.GetUserId(), r.GetChannelId())
	if err != nil {
		return nil, err
	}
	level, ok := notification.Parse(r.GetLevel())
	if !ok {
		return nil, seam.Invalid(apierr.InvalidLevel, &receipt.FieldError{Field: "level", Reason: fmt.Sprintf("must be all, mentions, none or empty, got %q", r.GetLevel())})
	}
	if err := receipt.ValidateBounded("muted_until_unix_ms", r.GetMutedUntilUnixMs()); err != nil {
		return nil, seam.Invalid(apierr.InvalidField, err)
	}
	reg := notification.Register{Key: k, Level: level, MutedUntilUnixMs: r.GetMutedUntilUnixMs(), VersionUnixMs: math.MaxInt64}
	changed := false
	w, err := seam.WriteUser(ctx, g.Core, seam.UserWrite[notification.Register]{
		User: k.User, Largest: reg,
		Encode: func(reg notification.Register) (*kgo.Record, error) { return event.EncodeNotifications(reg, 0, false) },
		Change: func(ctx context.Context) (notification.Register, int64, error, error) {
			res := g.notificationStore().Change(ctx, reg)
			changed = res.Changed
			return res.Register, seam.GenerationOf(res.Generation, res.Err), res.Err, nil
		},
		// Without Redis the version is the gateway's clock.
		Degraded: func(notification.Register, error) (notification.Register, error) {
			reg.VersionUnixMs = g.NowMs()
			return reg, nil
		},
	})
	if err != nil {
		return nil, err
	}
	reg = w.Value
	return connect.NewResponse(&receiptsv1.ChannelNotifications{
		UserId: k.User, ChannelId: k.Channel, Notifications: event.NotificationsToProto(reg),
		Changed: !w.Degraded && changed, Durability: w.Durability, RealtimeDegraded: w.Degraded,
	}), nil
}

// notificationStore is the notification registers' storage on the
// gate's stores.
func (g *Gate) notificationStore() notifications.Store { return notifications.NewStore(g.PG, g.Redis) }

// levels is what decides how a user's channels count in the badge: the
// user's default level and the channels' registers.
type levels struct {
	userDefault notification.Level
	byChannel   map[string]notification.Register
	nowMs       int64
}

// of is a channel's effective level and mute, and what of it the badge
// counts (notification.Counts).
func (l levels) of(ch string) (level notification.Level, muted, unread, mentions bool) {
	level, muted = l.byChannel[ch].Effective(l.userDefault, l.nowMs)
	unread, mentions = notification.Counts(level, muted)
	return level, muted, unread, mentions
}

// levelsOf reads a user's default level and the registers of the listed
// channels (none listed: nothing to read) in one Redis round trip when
// Redis holds the user's settings and whole hash (no round trip when the
// unread read brought them: read); else what it lacks from
// Postgres, which then hydrates Redis (a merge: a change made meanwhile
// wins). Without either store the call is Unavailable: a badge counted
// at the wrong levels would look right and be wrong.
func (g *Gate) levelsOf(ctx context.Context, user string, channels []string, read *notifications.Levels) (levels, error) {
	out := levels{nowMs: g.NowMs()}
	if len(channels) == 0 {
		return out, nil // no channel to count
	}
	var lv notifications.Levels
	var rerr error
	if read != nil {
		lv = *read // read with the counts: no round trip of its own
	} else {
		lv, rerr = g.notificationStore().LevelsOf(ctx, user, channels)
	}
	if rerr == nil && !lv.SettingsFound {
		// Settings Redis lost (or never held): read and hydrated.
		var sts map[string]privacy.Settings
		if sts, rerr = g.SettingsOf(ctx, []string{user}); rerr == nil {
			lv.Settings = sts[user]
		}
	}
	if rerr != nil {
		durable, err := g.DurableSettings(ctx, []string{user})
		if err != nil {
			return out, g.DurableErr(ctx, err)
		}
		lv.Settings = durable[0]
	}
	out.userDefault = lv.Settings.DefaultLevel
	regs, complete := lv.Registers, lv.Complete
	if rerr == nil && complete {
		out.byChannel = regs
		return out, nil
	}
	if rerr != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, rerr)
	}
	if err := g.Settled(ctx, []string{user}, nil); err != nil {
		return out, g.DurableErr(ctx, err)
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	durable, err := g.notificationStore().ReadPG(pctx, user, nil)
	cancel()
	if err != nil {
		return out, g.DurableErr(ctx, err)
	}
	out.byChannel = make(map[string]notification.Register, len(durable)+len(regs))
	for _, r := range durable {
		out.byChannel[r.Key.Channel] = r
	}
	for ch, r := range regs { // newer in Redis than in Postgres, maybe
		out.byChannel[ch], _ = notification.Merge(out.byChannel[ch], r)
	}
	// A user with more registers than one read returns is answered, never
	// marked complete in Redis.
	if rerr == nil && len(durable) < pgstore.MaxChannelsPerRead {
		if err := g.notificationStore().Hydrate(ctx, user, durable); err != nil {
			g.M.RedisDegraded.WithLabelValues(seam.RedisOpHydrate).Inc()
			g.WarnRedis(ctx, seam.RedisOpHydrate+" notifications", err)
		}
	}
	return out, nil
}
