// Package cursors is a user's read, private read and delivered cursors in
// a channel: a max-register per cursor (receipt.Merge), one read_receipts
// row and one field of the user's Redis hash u:{user}. Here are its Spec
// (spec.go, listed by the registry pkg/kinds), its Postgres statements
// (postgres.go: the guarded one-statement upsert, the persister's COPY
// path, the reads of the gateway's fallback and restore, and the change
// feed's upsert), its Redis layout (store.go, the value codec codec.go
// and the .lua scripts), the gateway's two-round trip merge of marks
// (marks.go) and their tests. Postgres and Store are the typed faces the
// persister, the gateway, the views and the repairs call.
//
// The user's hash is also what the gateway's restore guards: its
// ":loaded" marker, the incarnation marker of its slot and the user's
// fence (pkg/redisstore's loss.go) say whether Redis may be trusted for
// the user. An erasure leaves the hash empty and complete (the Spec's
// ErasedHashes) and its rows deleted (PGErase), after the erasure read
// the channels they name (PGChannels). Its Kafka codec is still
// pkg/event's.
package cursors
