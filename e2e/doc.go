// Package e2e builds the binaries and runs them as real processes against
// the local Postgres and Redis and a dev broker (kfake), drives load from
// several concurrent clients, injects faults, and checks the three
// invariants of ARCHITECTURE.md for every key once the system is quiet:
// no lost acknowledged write, no regression, convergence.
package e2e
