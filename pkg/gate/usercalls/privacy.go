package usercalls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

func settingsProto(st privacy.Settings) *receiptsv1.UserSettings {
	level, _ := notification.Register{}.Effective(st.DefaultLevel, 0)
	return &receiptsv1.UserSettings{UserId: st.User, ShareReadReceipts: st.ShareRead,
		ShareDeliveryReceipts: st.ShareDelivered, VersionUnixMs: st.VersionMs,
		DefaultNotificationLevel: level.String()}
}

// UpdateSettings implements receiptsv1connect.ReceiptServiceHandler: the
// new register (absent fields keep their value; the version is Redis'
// clock, above the stored one: settings.Store.Change) is written into
// Redis, the user's entries of kinds no longer shared leave their
// channels' views (and those shared again enter them), and the settings
// event, stamped with the erasure generation the write read, is made
// durable before the answer.
func (g *Users) UpdateSettings(ctx context.Context, req *connect.Request[receiptsv1.UpdateSettingsRequest]) (*connect.Response[receiptsv1.UserSettings], error) {
	m := req.Msg
	user := m.GetUserId()
	if err := receipt.ValidateID("user_id", user); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	if m.ShareReadReceipts == nil && m.ShareDeliveryReceipts == nil && m.DefaultNotificationLevel == nil {
		return nil, seam.Invalid(apierr.EmptyRequest, errors.New("nothing to change: set share_read_receipts, share_delivery_receipts or default_notification_level"))
	}
	var level notification.Level
	if m.DefaultNotificationLevel != nil {
		var ok bool
		if level, ok = notification.Parse(*m.DefaultNotificationLevel); !ok || level == notification.Unset {
			return nil, seam.Invalid(apierr.InvalidLevel, &receipt.FieldError{Field: "default_notification_level",
				Reason: fmt.Sprintf("must be all, mentions or none, got %q", *m.DefaultNotificationLevel)})
		}
	}
	cur, err := g.readBy.SettingsOf(ctx, []string{user})
	if err != nil {
		// The stored version is unknown: Postgres alone orders it.
		sts, perr := g.readBy.DurableSettings(ctx, []string{user})
		if perr != nil {
			return nil, g.DurableErr(ctx, perr)
		}
		cur = map[string]privacy.Settings{user: sts[0]}
	}
	st := cur[user]
	if m.ShareReadReceipts != nil {
		st.ShareRead = *m.ShareReadReceipts
	}
	if m.ShareDeliveryReceipts != nil {
		st.ShareDelivered = *m.ShareDeliveryReceipts
	}
	if m.DefaultNotificationLevel != nil {
		st.DefaultLevel = level
	}
	// The longest version sizes the record a full spool is asked to take.
	st.VersionMs = math.MaxInt64
	w, err := seam.WriteUser(ctx, g.Core, seam.UserWrite[privacy.Settings]{
		User: user, Op: seam.RedisOpSettings, Encode: event.EncodeSettings, Largest: st,
		Change: func(ctx context.Context) (privacy.Settings, int64, error, error) {
			st, gen, err := g.SettingsStore().Change(ctx, st)
			if err == nil {
				err = g.applySettingsToViews(ctx, st)
			}
			return st, gen, err, nil
		},
		// No Degraded: answering success while Redis may still show what
		// the user hides would break the promise.
	})
	if err != nil {
		return nil, err
	}
	st = w.Value
	if hides := (!st.ShareRead && cur[user].ShareRead) || (!st.ShareDelivered && cur[user].ShareDelivered); hides {
		// A mark in flight on any replica may have read the old
		// settings just before the change and still be publishing its
		// move (publishView: settings, then the view, within its
		// window). Once that window has passed, apply the
		// settings Redis holds now once more, so that when this call
		// returns nothing the user hid can show anywhere.
		if err := g.settleHiding(ctx, user); err != nil {
			g.RedisDegradedOn(ctx, seam.RedisOpSettings, 1, err)
		}
	}
	return connect.NewResponse(settingsProto(st)), nil
}

// settleHiding waits out the window in which a concurrent flush may
// still publish a move read under the user's old settings, then applies
// the settings Redis holds now to the user's views again.
func (g *Users) settleHiding(ctx context.Context, user string) error {
	select {
	case <-time.After(g.readBy.ViewWindow() + viewSettleMargin):
	case <-ctx.Done():
		return ctx.Err()
	}
	sts, err := g.readBy.SettingsOf(ctx, []string{user})
	if err != nil {
		return err
	}
	return g.applySettingsToViews(ctx, sts[user])
}

// viewSettleMargin is added to the view window when waiting out
// in-flight view moves (a command sent just before its client's deadline
// still runs in Redis).
const viewSettleMargin = 100 * time.Millisecond

// applySettingsToViews makes the user's channel views follow st
// (readby.Store.ApplySettings).
func (g *Users) applySettingsToViews(ctx context.Context, st privacy.Settings) error {
	return g.readBy.ViewStore().ApplySettings(ctx, st, g.Cfg.ReadBy.ViewStreamMaxLen)
}

// GetSettings implements receiptsv1connect.ReceiptServiceHandler.
func (g *Users) GetSettings(ctx context.Context, req *connect.Request[receiptsv1.GetSettingsRequest]) (*connect.Response[receiptsv1.UserSettings], error) {
	user := req.Msg.GetUserId()
	if err := receipt.ValidateID("user_id", user); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	sts, err := g.readBy.SettingsOf(ctx, []string{user})
	if err != nil {
		durable, perr := g.readBy.DurableSettings(ctx, []string{user})
		if perr != nil {
			return nil, g.DurableErr(ctx, perr)
		}
		return connect.NewResponse(settingsProto(durable[0])), nil
	}
	return connect.NewResponse(settingsProto(sts[user])), nil
}
