// Package deletions is a channel's deleted messages and a thread's
// deleted replies, a kind of state that owns its storage: the third kind
// in a folder of its own. The rule and the window are the domain
// floor's (channel.MergeDeletions, channel.DeletionWindow); here are its
// Spec (spec.go, listed by the registry pkg/kinds), its Postgres
// statements (the .sql files, run by postgres.go), its Redis layout and
// scripts (redis.go, the .lua files), its bound where a deletion enters
// the API (bounds.go: no further than channel.DeletionLead beyond its
// head), the counts a reader's unread and mentions lose to deletions
// (CountPG, CountRedis, CountChannelsRedis) and the tests of all of
// them. Store is the typed face the gateway calls. It has no part of an erasure: a deletion names
// no user.
//
// It is written against the drivers (pgstore.Store's Pool and
// Classified, redisstore.Store's Exec, Client and Prefix), which name
// none of it, and keeps its count in the channel value of pkg/kinds/heads
// (its key and Lua). The run search both
// counts share (seqrun.lua, at most 64 halving steps) is the kind's. The
// unread view (pkg/views/unread) asks a channel's count only where the
// channel value says the set holds some (CountChannelsRedis; CountPG in
// its Postgres fallback). Its Kafka codec is still pkg/event's.
package deletions
