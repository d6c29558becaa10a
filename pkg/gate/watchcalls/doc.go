// Package watchcalls serves WatchChannels and the server-sent events
// route over the watch hub (pkg/watch): validation, the per-client bounds,
// and snapshots that carry what GetTicks answers.
package watchcalls
