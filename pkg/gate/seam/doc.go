// Package seam is what every RPC handler of the gateway goes through: the
// configuration, the stores (Redis bounded by RedisTimeout once, on its
// client; Postgres), the producer, the metrics, the call's facts (heads
// and membership, Redis first, Postgres for what it lacks), the restores
// after Redis lost data (Restorer: a read or write waits until Postgres
// holds what was in flight), and the steps of a write (Admit a record
// before Redis is touched, stamp the erasure generation, Produce: the
// gateway's one call of the producer, the degraded and Unavailable
// answers). The handlers, grouped by concern in the packages beside it,
// hold a *Core; pkg/gate composes them into the ReceiptService.
package seam
