// Package notifications is the notification-level register, a kind of
// state that owns its storage: the first kind in a folder of its own.
// The rule is the domain floor's (pkg/notification); here are its Spec
// (spec.go, listed by the registry pkg/kinds), its Postgres statements
// (the .sql files, run by postgres.go), its Redis layout, value codec
// and scripts (redis.go, codec.go, the .lua files), the badge's read of
// the levels (levels.go, with the user's settings through
// pkg/kinds/settings' Probe), its part of an erasure (erase.sql and the
// Spec's ErasedHashes) and the tests of all of them. Store is the typed
// face the gateway calls.
//
// It is written against the drivers (pgstore.Store's Pool and
// Classified, redisstore.Store's Exec, Client, Prefix and markers),
// which name none of it. Its Kafka codec is still pkg/event's.
package notifications
