package gate

import (
	"cmp"
	"context"

	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/views/unread"
)

// SetRebuildHook makes f run as each view rebuild starts (tests only).
func SetRebuildHook(g *Gate, f func()) { g.RebuildHook = f }

// PageOfChannels is pageOf over channel ids (the Postgres fallbacks' cut).
func PageOfChannels(channels []string, after string, limit int) ([]string, bool) {
	return seam.PageOf(channels, func(ch string) string { return ch }, unread.Page{After: after, Limit: limit})
}

// DurableUnread is GetUnread's Postgres fallback: the counts from
// Postgres alone (tests only).
func DurableUnread(ctx context.Context, g *Gate, user string) ([]unread.ChannelView, error) {
	return g.durableUnread(ctx, user, nil)
}

// FirstInOrder is firstInOrder of ints, ascending.
func FirstInOrder(items []int, n int) []int {
	return firstInOrder(items, n, func(a, b *int) int { return cmp.Compare(*a, *b) })
}
