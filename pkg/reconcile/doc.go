// Package reconcile repairs what the fast path could not write: the
// dead-letter consumer and the drift sweep of the dlt-reconciler.
//
// The Consumer reads the dead-letter topic in a consumer group. For each
// decodable record it reads the key's current value from Redis (the
// real-time truth), merges it with the record by the max rule, upserts
// Postgres with the same rule and max-merges the result back into Redis, so
// both stores converge. Retryable failures are retried with jittered
// exponential backoff for a bounded time; what still fails, and every
// record that can never be repaired (undecodable, invalid, unknown schema),
// is parked in Postgres (parked_dead_letters) for an operator. The offset
// of a dead letter is committed only after it was repaired or parked.
//
// The Sweeper walks Postgres and Redis in bounded, rate-limited pages,
// counts disagreements by direction and repairs them both ways. Every write
// either makes is a max-merge, so a repair can never move a key backwards.
//
// The Replayer re-applies parked records for the operator CLI: it repairs
// decodable ones directly and re-produces the others to the main topic.
package reconcile
