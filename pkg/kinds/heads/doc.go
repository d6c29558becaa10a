// Package heads is a channel's head: the greatest message seq notified, a
// max-register by seq (channel.MergeHead), one channel_heads row. Here
// are its Spec (spec.go, listed by the registry pkg/kinds), its Postgres
// statements (the .sql files, run by postgres.go) and their tests; Store
// is the typed face the gateway calls. A head belongs to no user, so it
// has no part of an erasure.
//
// Its Redis copy is a part of the channel value hd:{channel} (redis.go,
// raise.lua), which the head shares with the deletion count
// (pkg/kinds/deletions) and the greatest group mention
// (pkg/kinds/groupmentions): the kind owns the value's key and its Lua
// (channelvalue.lua, which the other two kinds' scripts start with), and
// the unread view reads it in one MGET a slot (QueueChannelValues).
// Beside it the kind keeps the channel's newest message ids (mi:, and a
// thread's, which the thread kind remembers through RememberReplyIDs),
// the inbox's jump targets. Its Kafka codec is still pkg/event's.
package heads
