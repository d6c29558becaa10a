// Package members is a user's membership register in a channel, a
// versioned register (channel.MergeMembership), one channel_members row
// and two Redis copies: a field of the user's membership hash um:{user}
// and one of the channel's cm:{channel}, with the member count. Here are
// its Spec (spec.go, listed by the registry pkg/kinds), its Postgres
// statements (the .sql files, run by postgres.go), its Redis layout
// (redis.go: the keys, the .lua scripts, Scripts; codec.go: the
// register's value), the membership facts of the gateway's checks
// (facts.go: QueueFacts, which the gateway pipelines with the channels'
// heads), its part of an erasure (the Spec's ErasedHashes,
// ErasedNameChannels and ErasedCounters: the user's hash left empty and
// complete, counting no left register, its channels cleaned; its
// RedisRedact: the user's register removed from each channel's hash,
// keeping the count; its PGErase, erase.sql: the user's rows) and the
// tests of all of them. Store is the typed
// face the gateway, the views and the tests call.
//
// Elsewhere: the user's default channel set (cursors and registers less
// those left), the unread view's, since it reads both kinds; its Kafka
// codec, pkg/event's.
package members
