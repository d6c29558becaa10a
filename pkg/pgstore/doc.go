// Package pgstore is the durable truth in Postgres (pgx/v5): migrations, the
// one-statement batch upsert guarded by the (epoch, seq) tuple compare, reads
// for the gateway's fallback, and the translation of Postgres errors into
// the two kinds the pipeline routes on: ErrRejected (bad data, dead-letter
// it) and ErrUnavailable (outage, retry it).
package pgstore
