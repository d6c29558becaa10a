// Package persister moves the events of the topic read-receipts into
// Postgres, the durable truth, as one member of a consumer group. Its
// files are its jobs:
//
//   - consume.go: the poller fills a window (decoding each record with
//     event.DecodeRecord, lingering to coalesce more while the writer is
//     busy) and hands it to the writer; settled offsets are committed;
//     rebalances wait until every window in hand is settled (kgo's
//     BlockRebalanceOnPoll), so a commit never lands on a partition this
//     member no longer owns.
//   - window.go: a window keeps one part per kind of state (pkg/kind),
//     each key the merge of its values by the kind's rule, so a key
//     changed many times costs one row per window.
//   - write.go: a window's parts become statements of at most
//     StatementRows keys in key order, Writers at a time, each in its own
//     transaction (statements hold disjoint key ranges, so they never wait
//     on each other's row locks); a row Postgres rejects is isolated by
//     bisecting its statement (batch.Bisect) and the records of its key go
//     to the dead-letter topic (acked) with the reason; only then are the
//     window's offsets settled.
//   - erase.go: a window's erasures are applied first, events that predate
//     their user's erasure are dropped, and an erasure another process
//     applied while the window was written is taken back.
//   - outage.go: an outage (pgstore.ErrUnavailable, the dead-letter topic
//     unavailable) is retried with capped backoff for as long as it lasts:
//     Kafka holds the backlog, so nothing good is dead-lettered because of
//     one. Meanwhile fetching is paused and Ready reports it (/readyz 503).
//
// A crash between two statements' commits leaves the window uncommitted:
// the next owner replays it, and every write being a merge makes that
// harmless. On shutdown the window in hand is finished on a context
// bounded by DrainTimeout, committed, and the group is left; one that
// cannot finish in time is abandoned uncommitted and replayed.
package persister
