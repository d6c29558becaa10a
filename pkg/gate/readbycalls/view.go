package readbycalls

import (
	"context"
	"time"

	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
)

// PublishView applies the public cursors of merged marks to their
// channels' views: the read and delivered cursors (never the private
// read) of users who share that kind. The view's script keeps only moves
// that advance, so passing cursors that did not move costs a no-op. A
// failure only counts as degraded: a view rebuild from Postgres repairs it
// (see viewOf).
func (g *ReadBy) PublishView(ctx context.Context, merged []cursors.MergeResult) {
	var moves []readby.Move
	var users []string
	seen := map[string]bool{}
	for _, r := range merged {
		if r.Err != nil || !r.Advanced {
			continue
		}
		st := r.State
		if !seen[st.Key.User] {
			seen[st.Key.User] = true
			users = append(users, st.Key.User)
		}
		if !st.Read.Position.IsZero() {
			moves = append(moves, readby.Move{Channel: st.Key.Channel, User: st.Key.User, Side: readby.Read,
				Position: st.Read.Position, AtUnixMs: st.UpdatedAtUnixMs})
		}
		if !st.Delivered.Position.IsZero() {
			moves = append(moves, readby.Move{Channel: st.Key.Channel, User: st.Key.User, Side: readby.Delivered,
				Position: st.Delivered.Position, AtUnixMs: st.UpdatedAtUnixMs})
		}
	}
	if len(moves) == 0 {
		return
	}
	// A move read under settings the user has since changed is published
	// within this window or not at all: a change that hides waits it out
	// (settleHiding), then applies the settings once more.
	wctx, cancel := context.WithTimeout(ctx, g.ViewWindow())
	defer cancel()
	if moves, users = g.trackedMoves(wctx, moves, users); len(moves) == 0 {
		return
	}
	settings, err := g.SettingsOf(wctx, users)
	if err != nil {
		// Unknown settings: share nothing (privacy fails closed); the
		// next rebuild of the view adds what may be shown.
		g.RedisDegradedOn(ctx, seam.RedisOpSettings, 1, err)
		return
	}
	shown := moves[:0]
	for _, m := range moves {
		if settings[m.User].Shares(string(m.Side)) {
			shown = append(shown, m)
		}
	}
	if _, err := g.ViewStore().Apply(wctx, shown, g.Cfg.ReadBy.ViewStreamMaxLen); err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpView, 1, err)
	}
}

// trackedMoves leaves out the moves in channels without membership
// registers (untracked: their views stay empty, see
// members.Store.UntrackedChannels), and the users left without a move. On a
// Redis error it keeps every move (the view script checks again).
func (g *ReadBy) trackedMoves(ctx context.Context, moves []readby.Move, users []string) ([]readby.Move, []string) {
	var channels []string
	seen := map[string]bool{}
	for _, m := range moves {
		if !seen[m.Channel] {
			seen[m.Channel] = true
			channels = append(channels, m.Channel)
		}
	}
	untracked, err := g.MemberStore().UntrackedChannels(ctx, channels)
	if err != nil || len(untracked) == 0 {
		return moves, users
	}
	kept := moves[:0]
	left := map[string]bool{}
	for _, m := range moves {
		if !untracked[m.Channel] {
			kept = append(kept, m)
			left[m.User] = true
		}
	}
	if len(kept) == len(moves) {
		return moves, users
	}
	keptUsers := users[:0]
	for _, u := range users {
		if left[u] {
			keptUsers = append(keptUsers, u)
		}
	}
	return kept, keptUsers
}

// SettingsOf returns users' privacy settings: Redis, and for those Redis
// does not hold (never set, or lost in a FLUSHALL), Postgres, written back
// to Redis (defaults included, so the next read is one round trip).
func (g *ReadBy) SettingsOf(ctx context.Context, users []string) (map[string]privacy.Settings, error) {
	sts, found, err := g.SettingsStore().ReadRedis(ctx, users)
	if err != nil {
		return nil, err
	}
	out := make(map[string]privacy.Settings, len(users))
	var missing []string
	for i, st := range sts {
		out[st.User] = st
		if !found[i] {
			missing = append(missing, st.User)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	durable, err := g.DurableSettings(ctx, missing)
	if err != nil {
		return nil, err
	}
	// An erased user's row the persister has not deleted yet is not
	// written back (the erasure deleted the user's settings from Redis).
	tombs, err := g.Redis.Tombstones(ctx, missing)
	if err != nil {
		return nil, err
	}
	kept := durable[:0:0]
	for _, st := range durable {
		if t, ok := tombs[st.User]; ok && t.Predates(st.VersionMs) {
			out[st.User] = st
			continue
		}
		kept = append(kept, st)
	}
	if len(kept) == 0 {
		return out, nil
	}
	merged, err := g.SettingsStore().MergeRedis(ctx, kept)
	if err != nil {
		return nil, err
	}
	for _, st := range merged {
		out[st.User] = st
	}
	return out, nil
}

// DurableSettings reads users' settings from Postgres under PostgresTimeout.
func (g *ReadBy) DurableSettings(ctx context.Context, users []string) ([]privacy.Settings, error) {
	if err := g.Settled(ctx, users, nil); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	return g.SettingsStore().ReadPG(pctx, users)
}

// LeaveView takes a member who left out of the channel's view. A failure
// only counts as degraded: read-by and ticks list members only, so a
// leftover entry is never shown, and the view's script refuses later
// moves of a user whose register says "left".
func (g *ReadBy) LeaveView(ctx context.Context, k receipt.Key) {
	if err := g.ViewStore().Remove(ctx, k.Channel, []string{k.User}, readby.Read, readby.Delivered); err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpView, 1, err)
	}
}

// JoinView puts a member who (re)joined back into the channel's view
// with the public cursors they already hold there: a leave took them
// out, and a rejoin whose join point does not move a cursor publishes
// nothing by itself. A failure only counts as degraded (a rebuild of the
// view from Postgres repairs it).
func (g *ReadBy) JoinView(ctx context.Context, k receipt.Key) {
	states, _, err := g.CursorStore().Get(ctx, k.User, []string{k.Channel})
	if err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpView, 1, err)
		return
	}
	var held []cursors.MergeResult
	for _, st := range states {
		if st.Key == k {
			held = append(held, cursors.MergeResult{State: st, Advanced: true})
		}
	}
	g.PublishView(ctx, held) // moves that do not advance the view are no-ops
}

// ViewStore is the read-by view's storage on the gate's stores.
func (g *ReadBy) ViewStore() readby.Store { return readby.NewStore(g.PG, g.Redis) }

// ViewWindow is how long a mark's publishView may take from reading the
// users' settings to applying its moves, its round trips together: one
// Redis bound (RedisTimeout), so that a change that hides waits little.
func (g *ReadBy) ViewWindow() time.Duration { return g.Cfg.RedisTimeout }
