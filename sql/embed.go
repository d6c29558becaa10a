// Package sql embeds the numbered Postgres migrations so that every binary's
// migrate command, the tests and the Helm hook apply the same bytes.
package sql

import "embed"

// Migrations holds migrations/NNNN_name.up.sql, applied by number
// (pgstore.Migrate, tern's migrate package): the numbers run 1, 2, 3, …
// without a gap, and each file is a text/template, so "{{" must not appear
// in one.
//
//go:embed migrations/*.up.sql
var Migrations embed.FS
