// Package members is a user's membership register in a channel, a
// versioned register (channel.MergeMembership), one channel_members row.
// Here are its Spec (spec.go, listed by the registry pkg/kinds), its
// Postgres statements (the .sql files, run by postgres.go) and their
// tests; Store is the typed face the gateway calls.
//
// Still elsewhere: its two Redis copies (a field of the user's membership
// hash um:{user} and one of the channel's cm:{channel}, with the member
// count), redisstore's; its rows' part of an erasure, pgstore's; the
// user's default channel set (cursors and registers less those left),
// pgstore's, since it reads both kinds; its Kafka codec, pkg/event's.
package members
