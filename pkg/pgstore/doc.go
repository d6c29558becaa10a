// Package pgstore is the Postgres driver (pgx/v5): the pool and its
// flags, migrations (tern's migrate package over the embedded
// sql/migrations), the deployment settings the binaries must agree on,
// the leader lock, the user tombstones and the erasure transaction, and
// Classify, the one place where Postgres errors are sorted into the
// classes the pipeline routes on (rejected: dead-letter it; unavailable:
// retry it; permanent: an operator must act).
//
// Every kind of state owns its storage (a folder below pkg/kinds, e.g.
// pkg/kinds/cursors or pkg/kinds/notifications): the kind runs its own
// statements on Pool, wraps their errors with Classified, and adds its
// part to an erasure (Erasure: the channels the user's rows name, its
// delete, its redaction). The driver names no kind's table.
package pgstore
