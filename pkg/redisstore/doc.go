// Package redisstore is the real-time view in Redis (go-redis/v9): one hash
// per user whose fields are channels, keys carrying a {user} hash tag so a
// user's keys share a Redis Cluster slot, a configurable key prefix, and Lua
// scripts, loaded once and run by SHA, that merge with the max rule so a
// write or a repopulate can never move a cursor backwards. Beside the
// cursors (store.go, codec.go, scripts.go) it keeps no kind's state: the
// channel heads and the channel values (head, deletion count, group
// mention top) are pkg/kinds/heads', the membership registers
// pkg/kinds/members'; it keeps the head's value codec (codec.go), which
// the heads and the thread heads share, and the slot-grouped MGET
// (mget.go) the channel values are read with.
//
// A field's value is the compact layout of codec.go (base-62 numbers,
// defaults and a delivered cursor equal to the read one omitted: about 23
// bytes for a typical state); values of the previous "v1:…" layout are
// still read and merged, and rewritten compactly when they next advance.
// A user's hash stays in Redis' compact listpack encoding only while it has
// at most hash-max-listpack-entries channels and every value is at most
// hash-max-listpack-value bytes: see BENCHMARKS.md, "Redis memory per state".
//
// It is also the driver a kind of state that owns its Redis layout (a
// folder below pkg/kinds, e.g. pkg/kinds/notifications) is written
// against (driver.go): the kind names its keys under Prefix, runs its
// embedded scripts through Exec (which loads them again when Redis lost
// them) or Client, and uses the markers, bounds and error wrapping of
// this package; its reads may ride the unread and inbox reads' pipelines
// (the unread view's Rider) or the gateway's checks' (QueueMarkValues
// beside the members kind's QueueFacts, one Exec), and an erasure resets
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
// through this package and the kinds' sets through their folders, and
// the bounds of a user's channel set are here (MaxUnreadChannels,
// WholeHashCount, ErrTooManyChannels).
package redisstore
