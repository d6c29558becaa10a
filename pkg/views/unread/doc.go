// Package unread is the unread view: one user's unread counts across
// channels (GetUnread, ReadAll, the badge) and the order the inbox sorts
// by. The badge rule is here, once: Count turns what the stores hold of
// one channel (rule.go's Input: the user's cursors and register, the
// channel's head, the user's mention seqs, the channel's group mention
// seqs, how its deletions change the counts) and the user's level there
// into the counts, and both reads fill an Input and call it.
//
// The Redis read (redis.go) takes the user's cursor, membership and
// mention hashes (hashes.go: read whole for the default set, as sorted
// tables; a big page in parts read at once, chunks.go) with the channel
// values (redisstore's ChannelValues: head, deletion count, group mention
// top), then, only where they may change the counts, the channels' group
// mentions above the read (groupmentions.go, through
// pkg/kinds/groupmentions) and their deletions (deletions.go, through
// pkg/kinds/deletions). It reports what Redis lacks (hashes not hydrated,
// heads, deletions and group mentions unknown) for the caller to hydrate
// and read again. Other reads may ride its pipeline (Rider: the
// notification levels, the thread probe). The inbox's order (inbox.go)
// reads the same hashes and heads without counting.
//
// The Postgres fallback (postgres.go) reads the same inputs from the
// durable tables (through pgstore and the kinds) and counts them with
// the same rule; the view's tests hold the two to the same answers.
//
// The view names no key of its own: it reads the kinds' (mentions,
// group mentions, deletions) through their folders and the driver's
// (cursors, memberships, channel values) through redisstore. It imports
// kinds and drivers, never a service.
package unread
