package e2e

import (
	"context"
	"fmt"
	"time"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// setLevel sets a random notification level and mute on k: a mute is
// long, or ends a second later (so the check sees it expired). Each user
// is set by the one client that owns it, in order: the model keeps the
// last acknowledged call.
func (w *countsWorkload) setLevel(ctx context.Context, k receipt.Key) {
	l := notification.Level(w.rng.IntN(int(notification.None) + 1))
	var until int64
	switch r := w.rng.Float64(); {
	case r < 0.25:
		until = time.Now().Add(time.Hour).UnixMilli()
	case r < 0.5:
		until = time.Now().Add(time.Second).UnixMilli()
	}
	req := &receiptsv1.SetNotificationsRequest{UserId: k.User, ChannelId: k.Channel, Level: l.String(), MutedUntilUnixMs: until}
	if _, ok := call(ctx, w, w.cl.SetNotifications, req); !ok {
		return
	}
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.ops++
	w.m.levels[k] = levelSet{level: l, until: until}
	if until < time.Now().Add(time.Minute).UnixMilli() {
		w.m.lastMuteEnd = max(w.m.lastMuteEnd, until) // a short mute: the check waits for its end
	}
}

// levelAt is the model's effective level and mute of k at nowMs (no user
// default is ever set: unset counts as all).
func (m *countsModel) levelAt(k receipt.Key, nowMs int64) (notification.Level, bool) {
	ls := m.levels[k]
	return notification.Register{Level: ls.level, MutedUntilUnixMs: ls.until}.Effective(notification.Unset, nowMs)
}

// levelProblem compares a channel's level and mute from the API with the
// model's.
func (m *countsModel) levelProblem(phase string, k receipt.Key, c *receiptsv1.ChannelUnread, nowMs int64) error {
	l, muted := m.levelAt(k, nowMs)
	if c.GetLevel() != l.String() || c.GetMuted() != muted || c.GetMutedUntilUnixMs() != m.levels[k].until {
		return fmt.Errorf("%s %s: (level, muted, until) = (%s, %t, %d), model (%s, %t, %d)", phase, k.KafkaKey(),
			c.GetLevel(), c.GetMuted(), c.GetMutedUntilUnixMs(), l, muted, m.levels[k].until)
	}
	return nil
}
