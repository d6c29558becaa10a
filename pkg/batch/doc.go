// Package batch holds generic helpers for writing a batch of items in one
// go: Dedupe folds items with the same key into one (the persister keeps the
// greatest value per key, so the database sees each key once), and Bisect
// isolates the items a store rejects by splitting the batch in halves, so
// one bad row cannot hold back the rest (the idea of benthos' BatchError: a
// partial failure is a value listing the failed indices, not a log line).
// It imports only the standard library.
package batch
