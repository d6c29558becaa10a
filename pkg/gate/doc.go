// Package gate is kafkagate's receipt service: it implements
// receiptsv1connect.ReceiptServiceHandler by composing one handler per
// concern, each on the shared seam.Core (pkg/gate/seam: configuration,
// stores, facts, restores, the write step and the one call of the
// producer):
//
//   - markcalls: MarkReceipts, MarkRead, MarkDelivered, GetReadState;
//   - channelcalls: notices, deletions, JoinChannel, LeaveChannel,
//     GetChannel;
//   - threadcalls: the thread calls, and the thread counts the unread
//     answers show;
//   - readbycalls: GetMessageReceipts, GetTicks, and the read-by view's
//     upkeep;
//   - usercalls: UpdateSettings, GetSettings, EraseUser;
//   - watchcalls: WatchChannels (pkg/watch).
//
// This package answers the rest: the unread counts and badges (GetUnread,
// LookupReceipts' badges), the inbox, notification levels, MarkUnread and
// ReadAll. Unread counts, the badge and the inbox's order come from the
// unread view (pkg/views/unread: its Redis read, its Postgres fallback
// and the badge rule, Count); the gate hydrates what the view reports
// Redis lacks and reads again (channels.go), and applies each channel's
// level (notifications.go). pkg/gate/server serves it on one port.
//
// Write path, per call: validate every item (all-or-nothing,
// InvalidArgument naming the field) → check the channel rules (seq within
// a known head, else Aborted HEAD_BEHIND with Retry-After; membership) →
// max-merge into Redis (synchronous, so the next read sees it; every round
// trip bounded by RedisTimeout, set once on the gate's client, and a Redis
// failure only marks the answer realtime_degraded) → make every record
// durable through Config.Producer (seam.Core.Produce) → answer. Success
// means durable, and says where (durability KAFKA or SPOOLED). When the
// producer cannot make the records durable the call answers Unavailable
// (HTTP 503) with Retry-After and nothing is acknowledged; a call a full
// spool refuses up front is refused before Redis (seam.Core.Admit).
// Concurrent calls' marks share one Redis pipeline and one durable write
// (markcalls/coalesce.go), each answered exactly as alone. Every refusal
// is built by pkg/apierr with its reason.
//
// Readiness: the gate is ready while its producer can take durable
// writes. Redis down only degrades answers.
//
// Read path: Redis first; when the user's hash is not known complete, or
// Redis fails, Postgres is read (once it holds what was in flight:
// seam.Restorer), the answer is the max-merge of both, and the durable
// states are max-merged back into Redis, which can never undo a newer
// write.
package gate
