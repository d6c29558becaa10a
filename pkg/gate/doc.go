// Package gate is the core of kafkagate, the receipts gateway. It implements
// receiptsv1connect.ReceiptServiceHandler and serves it on one port as gRPC,
// gRPC-Web, Connect and HTTP/JSON (REST routes from the google.api.http
// annotations, transcoded by vanguard), with gRPC reflection and health.
// Every route sits behind the API guard (pkg/apiauth, Config.Auth): bearer
// tokens or mTLS, and per-client rate limits in events (a batch costs its
// items, charged once decoded).
//
// Write path, per call: validate every item (all-or-nothing, InvalidArgument
// naming the field) → max-merge into Redis in one pipeline (synchronous, so
// the next read sees it; bounded by a short timeout, and a Redis failure only
// marks the answer realtime_degraded) → produce every record keyed
// "user:channel" with acks=all and wait for all acks under one deadline →
// answer one result per item. Success means durable, and says where
// (durability KAFKA or SPOOLED).
//
// Spool (Config.SpoolDir): when Kafka does not ack a call's records within
// SpoolAfter, they are appended to a local spool (pkg/spool) in one fsynced
// group and the call answers SPOOLED. After such a Kafka failure a circuit
// makes later calls spool at once, until the replayer has delivered to Kafka
// again. The replayer (started by New, stopped by Close) sends the spool to
// Kafka in order, batch by batch with capped unbounded backoff, committing a
// batch only once Kafka acked all of it; it also sends what a previous
// process left. When the records do not fit in the spool (SpoolMaxBytes), or
// without a spool when Kafka fails, the call answers Unavailable (HTTP 503)
// with Retry-After and nothing is acknowledged. Redis is merged before the
// durable step, so it may hold marks of a refused call (the caller retries;
// otherwise the reconciler's drift sweep makes Postgres agree); a call bound
// for an already full spool is refused before Redis.
//
// Readiness: the gate is ready while it can take durable writes, i.e. Kafka
// answers or the spool has room. Redis down only degrades answers.
//
// Read path: Redis first; when the user's hash is not known complete, or
// Redis fails, Postgres is read, the answer is the max-merge of both, and the
// user's durable states are max-merged back into Redis (hydrate), which can
// never undo a newer write.
package gate
