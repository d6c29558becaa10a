// Package watch fans the per-channel Redis streams of the read-by view
// (pkg/views/readby, which names their keys: Config.Keys; one entry per
// public cursor advance, appended by the view's script beside the
// cursors it moves) out to the local subscribers of one gateway replica.
//
// One reader per replica (Hub.Run, a lifecycle component) reads, with one
// XREAD, the streams of every channel some local subscriber watches, and
// dispatches the entries to those subscribers without ever blocking on
// them. Each subscriber coalesces what it has not sent yet to one update
// per (channel, user, kind), keeping the highest position, and sends at
// most once per Config.Coalesce window. Its resume token holds, per
// channel, the last stream id it has sent; a stream opened with a token
// resumes after those ids (XRANGE), or, when entries after one of them
// were trimmed, says the token expired and sends a snapshot of those
// channels instead. Several replicas need no coordination: each reads
// Redis, and a token from one resumes on another.
//
// Why Redis Streams rather than (sharded) pub/sub plus a snapshot: a
// stream is the replay log a resume token needs, bounded by MAXLEN, and
// "trimmed past the token" is known (XINFO's first entry); with
// pub/sub every reconnect would need a snapshot, and a message published
// while a replica re-subscribes is lost without a trace.
package watch
