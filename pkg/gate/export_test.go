package gate

// SetRebuildHook makes f run as each view rebuild starts (tests only).
func SetRebuildHook(g *Gate, f func()) { g.rebuildHook = f }
