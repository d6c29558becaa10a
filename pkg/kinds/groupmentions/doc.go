// Package groupmentions is a channel's group mentions (the messages that
// mention every member but their sender), a kind of state that owns its
// storage: the second kind in a folder of its own. The rule is the
// domain floor's (channel.MergeGroupMentions); here are its Spec
// (spec.go, listed by the registry pkg/kinds), its Postgres statements
// (the .sql files, run by postgres.go), its Redis layout, member codec
// and scripts (redis.go, codec.go, the .lua files), its part of an
// erasure (a redaction of the user as a sender: redact.sql and
// redact.lua, the Spec's PGRedact and RedisRedact) and the tests of all
// of them. Store is the typed face the gateway calls.
//
// It is written against the drivers (pgstore.Store's Pool and
// Classified, redisstore.Store's Exec, Client and Prefix), which name
// none of it, and keeps its top in the channel value of pkg/kinds/heads
// (its key and Lua). The unread view
// (pkg/views/unread) reads a channel's group mentions above a user's read
// through ReadAboveRedis, and its Postgres fallback through ReadPG. Its
// Kafka codec is still pkg/event's.
package groupmentions
