// Package benchpg is the benchmarks' side of Postgres: the database a
// bench owns (dropped and created empty), its connections and store named
// AppName, and what the reports read of the server (settings, WAL, table
// and backend statistics, the rows).
package benchpg
