// Where acknowledged marks are durable, summed up for logs and metrics.
import { Durability, type ReceiptResult } from "./gen/receipts/v1/receipts_pb.js";

/**
 * The outcome of a call's marks (markReceipts, markRead, markDelivered,
 * markUnread, readAll). Every result of a successful call is durable;
 * its durability says where:
 *
 * - Durability.KAFKA: acknowledged by Kafka (acks=all).
 * - Durability.SPOOLED: Kafka did not acknowledge in time; the mark is in
 *   the gateway's fsynced local spool and reaches Kafka (and Postgres)
 *   when Kafka is back. It is safe; it is late.
 *
 * realtimeDegraded says Redis was not updated: reads may show the old
 * cursor until the gateway repairs the real-time view. Neither needs a
 * retry; both are worth a metric.
 */
export interface Outcome {
  /** Results durable in Kafka. */
  kafka: number;
  /** Results durable in the gateway's spool, on their way to Kafka. */
  spooled: number;
  /** Results whose real-time view was not updated. */
  degraded: number;
  /** Marks that moved a cursor (the others were at or behind it: no-ops). */
  advanced: number;
  /** Indexes of results refused on their own while the call went through (their reason: STALE_EPOCH). */
  refused: number[];
}

/** Sums up results, in the order the call answered them. */
export function summarize(results: readonly ReceiptResult[]): Outcome {
  const o: Outcome = { kafka: 0, spooled: 0, degraded: 0, advanced: 0, refused: [] };
  results.forEach((r, i) => {
    if (r.durability === Durability.KAFKA) {
      o.kafka++;
    } else if (r.durability === Durability.SPOOLED) {
      o.spooled++;
    }
    if (r.realtimeDegraded) {
      o.degraded++;
    }
    if (r.advanced) {
      o.advanced++;
    }
    if (r.reason !== "") {
      o.refused.push(i);
    }
  });
  return o;
}

/** "KAFKA", "SPOOLED" (or "DURABILITY_UNSPECIFIED"): the name the REST API spells. */
export function durabilityName(d: Durability): string {
  return Durability[d] ?? String(d);
}
