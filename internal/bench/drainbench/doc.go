// Package drainbench measures how fast the persister binary drains a
// backlog into Postgres, and, in the same run, the bounds it is judged
// against (`make bench-persister`).
//
// One run generates a deterministic data set of READ marks (Dataset:
// Zipf-skewed keys, per-key seqs that mostly advance, with resends and
// late arrivals), then for every round and every persister variant (a
// binary and its extra arguments, interleaved so that A/B comparisons share
// the machine's noise):
//
//  1. recreates a Postgres database and migrates it with the variant's own
//     `persister migrate`;
//  2. starts a fresh `devbroker` process on a free port and a temporary data
//     directory and produces every record, encoded by pkg/event exactly as
//     the gateway encodes it;
//  3. starts the persister (cold) and polls Postgres until it holds every
//     final row, measuring CPU per process and for the whole machine
//     (/proc), rows written, HOT updates and WAL from Postgres' statistics,
//     then verifies every row against the greatest value per key computed
//     from the data set.
//
// Each round then measures the baselines on the same final rows: a raw
// COPY in random order (1 and 2 connections) into the receipts table and
// into a plain table with only a primary key, and a naive one-upsert-per-
// transaction writer over a prefix of the events. Results (every figure,
// logs, the persister's /metrics) go to a run directory as JSON, and a
// markdown summary of medians and same-run ratios is printed.
package drainbench
