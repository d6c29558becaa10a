package readbycalls

import (
	"context"

	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
	"github.com/readstate/receipts/pkg/views/readby"
)

// PublishThreadView streams thread moves to their channels' watchers: the
// heads that advanced, and the public thread cursors (never the private
// read) that advanced from stored to after, of users who share that kind.
// Like publishView it is realtime state, not durability: a failure only
// counts as degraded.
func (g *ReadBy) PublishThreadView(ctx context.Context, stored, after []thread.State, raised []threads.HeadResult) {
	var entries []readby.ThreadEntry
	for _, r := range raised {
		if r.Err != nil || !r.Advanced {
			continue
		}
		h := r.Head
		entries = append(entries, readby.ThreadEntry{Channel: h.Channel, Root: h.Root, Kind: readby.ThreadHead,
			Position: receipt.Position{Seq: h.Seq}, AtUnixMs: h.UpdatedAtUnixMs})
	}
	var users []string
	seen := map[string]bool{}
	var moves []readby.ThreadEntry
	for i := range after {
		was, now := stored[i].Cursors, after[i].Cursors
		k := after[i].Key
		if now.Read.Position.CompareBySeq(was.Read.Position) > 0 { // the public read, by seq
			moves = append(moves, readby.ThreadEntry{Channel: k.Channel, Root: k.Root, User: k.User,
				Kind: readby.ThreadRead, Position: now.Read.Position, AtUnixMs: now.UpdatedAtUnixMs})
		}
		if now.Delivered.Position.Compare(was.Delivered.Position) > 0 {
			moves = append(moves, readby.ThreadEntry{Channel: k.Channel, Root: k.Root, User: k.User,
				Kind: readby.ThreadDelivered, Position: now.Delivered.Position, AtUnixMs: now.UpdatedAtUnixMs})
		}
	}
	for _, m := range moves {
		if !seen[m.User] {
			seen[m.User] = true
			users = append(users, m.User)
		}
	}
	if len(users) > 0 {
		settings, err := g.SettingsOf(ctx, users)
		if err != nil {
			// Unknown settings: share no cursor (privacy fails closed);
			// the heads are no one's.
			g.RedisDegradedOn(ctx, seam.RedisOpSettings, 1, err)
			moves = nil
		}
		for _, m := range moves {
			// The view's kinds are privacy's: "r" and "d".
			kind := string(readby.Read)
			if m.Kind == readby.ThreadDelivered {
				kind = string(readby.Delivered)
			}
			if settings[m.User].Shares(kind) {
				entries = append(entries, m)
			}
		}
	}
	if len(entries) == 0 {
		return
	}
	if err := g.ViewStore().AppendThreadEntries(ctx, entries, g.Cfg.ReadBy.ViewStreamMaxLen); err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpView, 1, err)
	}
}
