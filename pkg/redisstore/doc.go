// Package redisstore is the real-time view in Redis (go-redis/v9): one hash
// per user whose fields are channels, keys carrying a {user} hash tag so a
// user's keys share a Redis Cluster slot, a configurable key prefix, and Lua
// scripts, loaded once and run by SHA, that merge with the max rule so a
// write or a repopulate can never move a cursor backwards. Beside the
// cursors (store.go, codec.go, scripts.go), channels.go keeps the channel
// heads and the membership registers (per user and per channel, with the
// member count), each merged by its rule of pkg/channel, and unread.go
// the bulk unread read.
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
// (Rider), and an erasure resets or deletes its user hashes (Erase's
// kindHashes, which may name the channels to clean: a thread register's
// fields) and has it redact the user in each channel (Erase's redact). This
// package names none of those kinds' keys, but for the sets the unread
// view still reads itself: the group mentions' (groupmentions.go), a
// channel's deletions (unreaddeletions.go, whose run search, seqrun.lua,
// the deletion kind's thread count shares as LuaSeqRun) and a user's
// mentions (unreadmentions.go, whose list decode the mention kind shares
// as ParseSeqList; an erasure also deletes that kind's earlier layout,
// the mn:{user}:<channel> sets). The read-by view (pkg/views/readby) owns
// the channel view's keys; an erasure has it clean each channel through
// Erase's redact, and UntrackedChannels answers it from the membership
// hash. Of the threads (pkg/kinds/threads) it keeps only the inbox's
// reply ids (RememberReplyIDs), not their keys.
package redisstore
