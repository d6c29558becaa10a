// Package kinds describes each kind of state once: its keys, its merge
// rule from the domain floor, its part of a Kafka event and its
// statements in Postgres and Redis (Spec). The persister's window, the
// drift sweep (both directions), dead-letter repair and the differential
// test of every merge rule loop over All() instead of spelling each kind
// out: a new kind is one file here, a migration and a proto field.
//
// Erasure tombstones are not a kind: an erasure orders every kind of one
// user (pkg/tombstone), so the loops apply it around the kinds.
package kinds
