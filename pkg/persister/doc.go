// Package persister moves receipt events from Kafka into Postgres, the
// durable truth. It is one member of a consumer group on the topic
// read-receipts and loops:
//
//  1. poll up to MaxPollRecords records (optionally lingering to coalesce
//     more), with rebalances blocked until the batch is settled;
//  2. decode each record (event.DecodeRecord: user events carry cursors,
//     mentions and membership registers, channel events the head); an
//     undecodable or invalid one goes to the dead-letter topic at once
//     (ProduceSync, acked) with headers naming the reason, the source
//     topic/partition/offset and the attempt;
//  3. keep, per table key, the merge of the window's values (window.go:
//     cursors receipt.Merge, heads channel.MergeHead, membership
//     channel.MergeMembership, mentions the union kept to the newest
//     MentionCap+1);
//  4. split the rows into Writers shards by a hash of user_id and upsert
//     the shards concurrently, each in one statement inside its own
//     transaction on its own connection (pgstore.Upsert, a max-merge, so
//     replays are harmless);
//  5. once every table's statements are settled (and the mention
//     retention of the window's keys has run), commit the polled offsets,
//     and only then allow a rebalance.
//
// A row that a table rejects sends the records of its key that fed that
// table to the dead-letter topic (a record that also fed another table is
// still written there; the reconciler's repair merges it again, which is
// harmless).
//
// Per-shard transactions deliberately relax the design's "one transaction
// per batch" (ARCHITECTURE.md) for throughput: on two cores two to four
// connections write about twice what one does (design LIMITS PG-U1/U2).
// The invariants still hold. A key always hashes to the same shard, so
// shards share no rows: their transactions never wait on each other's row
// locks and cannot deadlock. The offsets are committed only after the last
// shard commits, so a committed offset still means every record up to it
// is in Postgres or on the dead-letter topic. A crash (or an abandoned
// drain) between two shard commits leaves the batch uncommitted: the next
// owner replays all of it, rewriting the shards already in Postgres, and
// the max-merge makes that harmless, exactly as for a crash between the
// single transaction and the offset commit before. What is lost is only
// that a reader may briefly see some shards of a batch before others,
// which the design never promised (each key is a register of its own).
// Writers = 1 writes each batch in one transaction.
//
// Errors are sorted by kind. A row Postgres rejects (pgstore.ErrRejected)
// is isolated by bisecting its shard (batch.Bisect; the other shards are
// untouched); its source records go to the dead-letter topic and the rest
// is written. An outage (pgstore.ErrUnavailable) is retried by each shard
// not yet written (a committed shard is not redone) with capped
// exponential backoff and jitter for as long as it lasts, by design: Kafka
// holds the backlog, so waiting is always right and nothing good is ever
// dead-lettered because of an outage. Meanwhile fetching is paused and
// Ready reports the outage, so /readyz answers 503. A failed dead-letter produce is retried the same way,
// because an offset is committed only when each of its records is either in
// Postgres or acked on the dead-letter topic.
//
// Rebalances wait for the batch in hand (kgo's BlockRebalanceOnPoll), so a
// commit never lands on a partition this member no longer owns, and the
// revoke callback only has to commit offsets a failed commit left behind.
// A linger is cut short when a rebalance is waiting. During a long outage a
// waiting rebalance times out and the group drops this member; that loses
// nothing: its batch is uncommitted, the new owner replays it, and the late
// commit of this member fails harmlessly.
//
// On shutdown the batch in hand is finished on a context detached from the
// cancelled one but bounded by DrainTimeout, committed, and the group is
// left. A batch that cannot finish in time is abandoned uncommitted: the
// next owner of its partitions replays it.
package persister
