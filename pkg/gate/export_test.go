package gate

import "github.com/readstate/receipts/pkg/redisstore"

// SetRebuildHook makes f run as each view rebuild starts (tests only).
func SetRebuildHook(g *Gate, f func()) { g.rebuildHook = f }

// PageOfChannels is pageOf over channel ids (the Postgres fallbacks' cut).
func PageOfChannels(channels []string, after string, limit int) ([]string, bool) {
	return pageOf(channels, func(ch string) string { return ch }, redisstore.Page{After: after, Limit: limit})
}
