package readby

import (
	"context"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/privacy"
)

// ApplySettings makes the channel views of st's user follow st: the sides
// not shared leave the views of every channel the user has cursors in,
// the sides shared are (re)applied from the user's public cursors in
// Redis (a max-merge, streamed when it moves a watcher's view; ≤ 0 uses
// the default stream bound). The gateway runs it after a settings change,
// the repairs after a settings repair that changed Redis (kind.Env's
// SettingsApplied).
func (s Store) ApplySettings(ctx context.Context, st privacy.Settings, streamMaxLen int64) error {
	states, _, err := cursors.NewStore(s.redis).Get(ctx, st.User, nil)
	if err != nil {
		return err
	}
	var hide []Side
	if !st.ShareRead {
		hide = append(hide, Read)
	}
	if !st.ShareDelivered {
		hide = append(hide, Delivered)
	}
	var moves []Move
	for _, c := range states {
		if len(hide) > 0 {
			if err := s.Remove(ctx, c.Key.Channel, []string{st.User}, hide...); err != nil {
				return err
			}
		}
		if st.ShareRead && !c.Read.Position.IsZero() {
			moves = append(moves, Move{Channel: c.Key.Channel, User: st.User, Side: Read, Position: c.Read.Position, AtUnixMs: c.UpdatedAtUnixMs})
		}
		if st.ShareDelivered && !c.Delivered.Position.IsZero() {
			moves = append(moves, Move{Channel: c.Key.Channel, User: st.User, Side: Delivered, Position: c.Delivered.Position, AtUnixMs: c.UpdatedAtUnixMs})
		}
	}
	_, err = s.Apply(ctx, moves, streamMaxLen)
	return err
}

// SettingsApplier is ApplySettings as kind.Env.SettingsApplied wants it:
// what a service that repairs or sweeps the settings kind hands the kind,
// so the views follow a register it changed in Redis.
func (s Store) SettingsApplier(streamMaxLen int64) func(context.Context, privacy.Settings) error {
	return func(ctx context.Context, st privacy.Settings) error { return s.ApplySettings(ctx, st, streamMaxLen) }
}
