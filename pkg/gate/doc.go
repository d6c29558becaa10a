// Package gate is the core of kafkagate, the receipts gateway. It implements
// receiptsv1connect.ReceiptServiceHandler and serves it on one port as gRPC,
// gRPC-Web, Connect and HTTP/JSON (REST routes from the google.api.http
// annotations, transcoded by vanguard), with gRPC reflection and health.
//
// Write path, per call: validate every item (all-or-nothing, InvalidArgument
// naming the field) → max-merge into Redis in one pipeline (synchronous, so
// the next read sees it; bounded by a short timeout, and a Redis failure only
// marks the answer realtime_degraded) → produce every record keyed
// "user:channel" with acks=all and wait for all acks under one deadline →
// answer one result per item. Success means durable; a produce that fails or
// outlasts the deadline answers Unavailable (a local spool can be slotted in
// behind the durableWriter seam).
//
// Read path: Redis first; when the user's hash is not known complete, or
// Redis fails, Postgres is read, the answer is the max-merge of both, and the
// user's durable states are max-merged back into Redis (hydrate), which can
// never undo a newer write.
package gate
