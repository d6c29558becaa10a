// Package readby is the read-by view: every member's public read and
// delivered cursor of a channel as others may see them, what read-by
// (GetMessageReceipts, LookupReceipts), ticks and the channel watch
// answer from. It owns its Redis layout (redis.go: the channel view's
// hash, sorted sets and move stream, with the thread moves of the same
// stream), its Postgres fallback (postgres.go: the members' cursors and
// the cursor-move log, read to rebuild a view Redis lost), how a user's
// privacy settings shape it (settings.go), its part of an erasure
// (erase.go) and its answers (answers.go: Sight, what the gateway reads
// through its stores and answers from). It is composed from the
// kinds it reads (cursors, members, settings) and never imports a
// service.
package readby
