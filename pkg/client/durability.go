package client

import (
	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// Outcome sums up the results of a call's marks (MarkReceipts, MarkRead,
// MarkDelivered, MarkUnread, ReadAll). Every result of a successful call
// is durable; Durability says where:
//
//   - receiptsv1.Durability_KAFKA: acknowledged by Kafka (acks=all).
//   - receiptsv1.Durability_SPOOLED: Kafka did not acknowledge in time;
//     the mark is in the gateway's fsynced local spool and reaches Kafka
//     (and Postgres) when Kafka is back. It is safe; it is late.
//
// realtime_degraded says Redis was not updated: reads may show the old
// cursor until the gateway repairs the real-time view. Neither needs a
// retry; both are worth a metric.
type Outcome struct {
	// Kafka and Spooled count the results durable in each place.
	Kafka, Spooled int
	// Degraded counts results whose real-time view was not updated.
	Degraded int
	// Advanced counts marks that moved a cursor (the others were at or
	// behind it: no-ops).
	Advanced int
	// Refused lists the indexes of results refused on their own while the
	// call went through (their reason: STALE_EPOCH).
	Refused []int
}

// Summarize sums up results, in the order the call answered them.
func Summarize(results ...*receiptsv1.ReceiptResult) Outcome {
	var o Outcome
	for i, r := range results {
		switch r.GetDurability() {
		case receiptsv1.Durability_KAFKA:
			o.Kafka++
		case receiptsv1.Durability_SPOOLED:
			o.Spooled++
		}
		if r.GetRealtimeDegraded() {
			o.Degraded++
		}
		if r.GetAdvanced() {
			o.Advanced++
		}
		if r.GetReason() != "" {
			o.Refused = append(o.Refused, i)
		}
	}
	return o
}
