// Package redisstore is the Redis driver (go-redis/v9) of the kinds of
// state and the views: a configurable key prefix, keys carrying a {user}
// or {channel} hash tag so that a user's (a channel's) keys share a Redis
// Cluster slot, Lua scripts loaded once and run by SHA, pipelines grouped
// by slot (mget.go), the markers that say whether a hash may be trusted
// after Redis lost data (loss.go: the incarnation markers, the users'
// fences), the wait for replicas (replicas.go), the tombstones and the
// erasure's first step (erase.go), and the base-62 numerals and head
// codec the layouts share (codec.go). It keeps no kind's state: the
// cursors are pkg/kinds/cursors', the channel heads pkg/kinds/heads', the
// membership registers pkg/kinds/members'.
//
// It is also the driver a kind of state that owns its Redis layout (a
// folder below pkg/kinds, e.g. pkg/kinds/notifications) is written
// against (driver.go): the kind names its keys under Prefix, runs its
// embedded scripts through Exec (which loads them again when Redis lost
// them) or Client, and uses the markers, bounds and error wrapping of
// this package; its reads may ride the unread and inbox reads' pipelines
// (the unread view's Rider) or the gateway's checks' (the cursors'
// QueueMarkValues beside the members kind's QueueFacts, one Exec), and an erasure resets
// or deletes its user hashes (Erase's kindHashes, which may name the
// channels to clean, a membership or thread register's fields, and the
// counters to keep at "0") and has it clean or redact the user in each
// channel (Erase's redact: the membership kind's register in the
// channel's hash). This package names none of those kinds' keys but the
// mention kind's earlier layout, the mn:{user}:<channel> sets, which an
// erasure still deletes. The views (pkg/views/...) are written against
// it too: the read-by view owns the channel view's keys (an erasure has
// it clean each channel through Erase's redact, after the kinds); the
// unread view
// (pkg/views/unread) reads the user hashes and the channel values
// through their kinds and the kinds' sets through their folders, and
// the bounds of a user's channel set are here (MaxUnreadChannels,
// WholeHashCount, ErrTooManyChannels).
package redisstore
