// Package loadgen drives kafkagate over HTTP/JSON with a reproducible stream
// of read and delivered marks (zipf-skewed keys, duplicates, out-of-order
// sequences) and measures what a caller sees: acknowledged events per
// second, request latency percentiles and, optionally, the end-to-end lag
// until Postgres holds an acknowledged value.
//
// It also keeps the model the end-to-end tests check the stores against:
// for every key, the greatest read and delivered positions that the gateway
// acknowledged (Result.Acked). After the system is quiet, Redis and Postgres
// must cover that model for every key (the "no lost acknowledged write"
// invariant of docs/ARCHITECTURE).
//
// The load tool waits for the persister to catch up with pkg/grouplag.
package loadgen
