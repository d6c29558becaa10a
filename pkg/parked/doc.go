// Package parked keeps the dead letters the reconciler could not repair
// (parked_dead_letters) for an operator to list and replay: the table's
// statements over the Postgres driver. The reconciler parks, receiptsctl
// lists and replays, the drift sweep counts what is pending.
package parked
