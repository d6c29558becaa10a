// Package kind is the contract every kind of state is written to: a
// typed Spec[K, V] (its keys, its merge rule from the domain floor, its
// part of a Kafka event, its statements in Postgres and Redis), Env (the
// stores they run against), Kind (the Spec with its types erased, what
// the loops over every kind call), the persister's typed window Part,
// Digests for kinds whose values are large sets, and the small helpers
// specs share (ByUser, ValidIDs, ResultErrs, PGGetChunk).
//
// A kind is built on this package and the store drivers; the registry of
// kinds (pkg/kinds) imports the kinds, and the services import the
// registry and this package. Nothing here names a kind.
package kind
