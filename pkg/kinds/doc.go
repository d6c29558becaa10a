// Package kinds is the registry of the kinds of state: All() and the
// named kinds (Cursors, Notifications, …), each a kind.Kind built from a
// kind.Spec (pkg/kind, the contract). The persister's window, the drift
// sweep (both directions), dead-letter repair and the differential test
// of every merge rule loop over All() instead of spelling each kind out.
//
// A kind that owns its storage lives in a folder of its own below this
// one (cursors/, notifications/, groupmentions/, deletions/, settings/,
// mentions/, threads/, heads/, members/, fullyread/: its Spec, SQL, Lua,
// Redis layout and tests). The ownership test
// (ownership_test.go) lists where each kind's tables and key prefixes are
// named outside its folder; the list only shrinks.
//
// Erasure tombstones are not a kind: an erasure orders every kind of one
// user (pkg/tombstone), so the loops apply it around the kinds.
package kinds
