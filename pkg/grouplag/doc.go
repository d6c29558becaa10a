// Package grouplag reads a consumer group's lag on a topic from the brokers
// (committed offsets against the partitions' start and end offsets), for
// the persister's lag metric, receiptsctl and the tests. Brokers without a
// __consumer_offsets topic (kfake) give external lag exporters nothing to
// read, so the project computes lag itself, in this one place.
package grouplag
