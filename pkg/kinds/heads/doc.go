// Package heads is a channel's head: the greatest message seq notified, a
// max-register by seq (channel.MergeHead), one channel_heads row. Here
// are its Spec (spec.go, listed by the registry pkg/kinds), its Postgres
// statements (the .sql files, run by postgres.go) and their tests; Store
// is the typed face the gateway calls. A head belongs to no user, so it
// has no part of an erasure.
//
// Its Redis copy is a field of the channel value hd:{channel}, which the
// head shares with the deletion count and the greatest group mention
// (redisstore's channel value, read by the unread view in one MGET a
// slot); its Kafka codec is still pkg/event's.
package heads
