// Package event converts between receipt states and Kafka records on the
// topic read-receipts: the versioned protobuf value, the "user:channel" key,
// and the dead-letter header names shared by the persister and the
// reconciler.
package event
