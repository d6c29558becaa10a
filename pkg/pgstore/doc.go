// Package pgstore is the durable truth in Postgres (pgx/v5): migrations
// (tern's migrate package over the embedded sql/migrations), the
// one-statement batch upsert guarded by tuple compares (receipt.Merge), reads
// for the gateway's fallback, and Classify, the one
// place where Postgres errors are sorted into the classes the pipeline
// routes on (rejected: dead-letter it; unavailable: retry it; permanent:
// an operator must act).
//
// It is also the driver a kind of state that owns its storage (a folder
// below pkg/kinds, e.g. pkg/kinds/notifications, pkg/kinds/deletions or
// pkg/kinds/mentions) is written against: the kind runs its own
// embedded statements on Pool, wraps their errors with Classified, and
// adds its delete and its redaction to an erasure (Erase's kindDeletes
// and kindRedacts).
// This package writes none of those kinds' tables; its statements still
// read one: user_settings (pkg/kinds/settings), joined by the channels'
// change feed. The read-by view's fallback and the cursor-move log are
// the view's own (pkg/views/readby).
package pgstore
