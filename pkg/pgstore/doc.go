// Package pgstore is the durable truth in Postgres (pgx/v5): migrations
// (tern's migrate package over the embedded sql/migrations), the
// one-statement batch upsert guarded by tuple compares (receipt.Merge), reads
// for the gateway's fallback, parked dead letters, and Classify, the one
// place where Postgres errors are sorted into the classes the pipeline
// routes on (rejected: dead-letter it; unavailable: retry it; permanent:
// an operator must act).
package pgstore
