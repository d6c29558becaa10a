// Package settings is a user's privacy settings (what they share of their
// reads and deliveries, and their default notification level), a kind of
// state that owns its storage: the fourth kind in a folder of its own.
// The rule is the domain floor's (privacy.Merge); here are its Spec
// (spec.go, listed by the registry pkg/kinds), its Postgres statements
// (the .sql files, run by postgres.go), its Redis layout, value codec and
// script (redis.go, codec.go, merge.lua), its part of an erasure
// (erase.sql and the Spec's DeletedHashes: the hash is deleted, not left
// complete) and the tests of all of them. Store is the typed face the
// gateway calls; Probe lets another read (the badge's levels, in
// pkg/kinds/notifications) carry the settings read on its pipeline.
//
// It is written against the drivers (pgstore.Store's Pool and
// Classified, redisstore.Store's Exec, Client, Prefix, TombstoneKey,
// LuaCmp and DefaultsTTL). Redis' driver names none of it; Postgres'
// still reads the rows in the statements of the channels' change feed
// (UpsertChanges); the thread change feed (pkg/kinds/threads), the
// read-by view's member cursors and the cursor-move log's filter
// (pkg/views/readby) read them in their own. What a register does to the
// read-by view (readby.Store.ApplySettings) is the view's: the Spec's
// RedisWrite runs it through kind.Env.SettingsApplied, the gateway
// itself. Its Kafka codec is still pkg/event's.
package settings
