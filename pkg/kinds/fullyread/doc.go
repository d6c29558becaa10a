// Package fullyread is the fully-read marker (Matrix's m.fully_read): per
// (user, channel), and per thread, the message up to which the user has
// seen everything, a max-register by (seq, time, message id) (Merge,
// marker.go). It is private to the user (no other user's call reads it),
// counts in no unread number, moves apart from the read cursor, is synced
// across the user's devices (every device reads the one register) and is
// erased with the user.
//
// The kind owns all of its storage: its Spec (spec.go, listed by the
// registry pkg/kinds), its Postgres statements (the .sql files, run by
// postgres.go, on the table fully_read of sql/migrations), its Redis hash
// per user and its script (redis.go, merge.lua), its record payload
// (codec.go: records.proto's FullyRead in a payload of type
// PAYLOAD_TYPE_FULLY_READ) and its tests. The persister, the drift sweep,
// dead-letter repair and the erasure handle it through the Spec alone;
// the gateway's calls (SetFullyRead, and the marker in GetReadState and
// ListThreads) use Store.
package fullyread
