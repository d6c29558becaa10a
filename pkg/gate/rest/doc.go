// Package rest is the fast JSON codec of kafkagate's hot REST routes: the
// writes (POST /v1/receipts:mark and /v1/users/{user}/channels/{channel}/read
// or /delivered) and the big reads (GET /v1/users/{user}/unread and
// /threads). It decodes a request body or query straight into its message
// and encodes the answer by hand, as protojson would (errors are
// apierr.WriteREST's, as vanguard writes them).
//
// The decoder is strict: it accepts only what protojson reads the same
// way — known fields in either spelling, each at most once; strings of
// printable ASCII without escapes; int64 as an integer literal or a quoted
// one; enums by name or number; booleans — and reports false on anything
// else, so the caller falls back to the generic transcoder for the
// canonical answer. The encoders write protojson's shape (lowerCamelCase
// names, int64 as strings, enums by name, zero values left out).
//
// It is the gateway's one hand-written JSON scanner: everything else
// decodes with protojson or encoding/json.
package rest
