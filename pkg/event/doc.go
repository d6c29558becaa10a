// Package event converts between the domain's values and Kafka records on
// the topic read-receipts, and holds the dead-letter header names shared by
// the persister and the reconciler.
//
// Every record this build writes is a receipts.record.v1.Record (header
// receipts-type names it): an envelope (RecordEnvelope: schema version 9,
// the state's user and channel, the thread root where it is a thread's,
// the user's erasure generation and whether the gateway read it, when it
// was accepted) and one payload per kind it carries, each a message of
// records.proto named by its PayloadType. The key follows from the
// envelope: "user:channel", the channel, or "u::user" (ids escaped,
// receipt.EscapeKeyID; the ids are read from the value).
//
// The payloads of the kinds this package always decoded (cursors,
// mentions, membership, notification registers, heads, group mentions,
// deletions, settings, erasures, thread registers and heads) are decoded
// here into Decoded's fields, checked as before; that set is closed. A kind
// added later has a payload type of its own: Decoded keeps it in Payloads
// and the kind decodes it (kind.Spec's Payload, kind.DecodeRecord), so a
// new kind changes nothing here.
//
// Records of earlier builds (ReceiptEvent, ChannelEvent, UserEvent,
// schema versions 1 to 8, told apart by the key's shape) still decode to
// the same fields, with the envelope they imply; the type header, or
// without it the schema version (field 1 of every message), tells them
// from an envelope. testdata/golden-records.json holds each build's
// records and what they decode to.
package event
