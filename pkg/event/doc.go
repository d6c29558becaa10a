// Package event converts between the domain's values and Kafka records on
// the topic read-receipts: user events (key "user:channel": cursors,
// mentions, membership, stamped with the user's erasure generation),
// channel events (key "channel", no ':': the head) and user-wide events
// (key "u::user": an erasure tombstone), all versioned protobuf from the
// API's contract, told apart by the key's shape (Decoded is the sum of
// both); and the dead-letter header names shared by the persister and the
// reconciler. Ids in keys are escaped (receipt.EscapeKeyID: ':' and '%'),
// so the shapes stay apart whatever the ids hold; the ids are read from
// the value.
package event
