// Package gate is kafkagate's receipt service: it implements
// receiptsv1connect.ReceiptServiceHandler, the read and write logic behind
// every protocol (pkg/gate/server serves it on one port).
//
// Write path, per call: validate every item (all-or-nothing, InvalidArgument
// naming the field) → check the channel rules (seq within a known head,
// else Aborted HEAD_BEHIND with Retry-After: the notice is late;
// membership) → max-merge into Redis in one pipeline (synchronous, so the
// next read sees it; every round trip bounded by RedisTimeout, set once on
// the gate's client (redisstore.Bound), and a Redis failure only marks
// the answer realtime_degraded) → make every record keyed
// "user:channel" durable through Config.Producer → answer one result per
// item. Success means durable, and says where (durability KAFKA or SPOOLED,
// as the producer reports: pkg/producer owns the spool, its circuit and its
// replayer). When the producer cannot make the records durable (Kafka fails
// without a spool, or the spool is full) the call answers Unavailable (HTTP
// 503) with Retry-After and nothing is acknowledged. Redis is merged before
// the durable step, so it may hold marks of a refused call (the caller
// retries; otherwise the reconciler's drift sweep makes Postgres agree); a
// call the producer refuses up front (Producer.Refuse: a full spool) is
// refused before Redis. Concurrent calls share one Redis pipeline and one
// durable write (coalesce.go), each answered exactly as alone.
//
// Every refusal is built by pkg/apierr with its reason (a google.rpc.ErrorInfo
// naming the offending field).
//
// Readiness: the gate is ready while its producer can take durable writes.
// Redis down only degrades answers.
//
// Read path: Redis first; when the user's hash is not known complete, or
// Redis fails, Postgres is read, the answer is the max-merge of both, and the
// user's durable states are max-merged back into Redis (hydrate), which can
// never undo a newer write.
//
// Beside marks and reads the same service answers the channel calls
// (notices, unread counts, membership), read-by and ticks under each
// user's privacy settings (from the read-by view, pkg/views/readby, whose
// Redis layout, fallback and answers are the view's), user erasure, and
// WatchChannels over the watch hub (pkg/watch). Unread counts, the badge
// and the inbox's order come from the unread view (pkg/views/unread: its
// Redis read, its Postgres fallback and the badge rule, Count); the gate
// hydrates what the view reports Redis lacks and reads again
// (channels.go), and applies each channel's level (notifications.go).
package gate
