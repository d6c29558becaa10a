// Package sql embeds the numbered Postgres migrations so that every binary's
// migrate command, the tests and the Helm hook apply the same bytes.
package sql

import "embed"

// Migrations holds migrations/NNNN_name.up.sql, applied in name order.
//
//go:embed migrations/*.up.sql
var Migrations embed.FS
