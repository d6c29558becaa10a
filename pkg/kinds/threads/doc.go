// Package threads is the two thread kinds of state, which own their
// storage: a thread's head (HeadSpec, table thread_heads, hash
// th:{channel}) and a user's register in a thread (StateSpec: cursors,
// follow and kept mention seqs; table thread_states, hash tu:{user}).
// The rules are the domain floor's (thread.MergeHead, thread.Merge); here
// are their Specs (spec.go, listed by the registry pkg/kinds), their
// Postgres statements (the .sql files, run by postgres.go, and the change
// feed's, changes.go), their Redis layout, value codec and scripts
// (redis.go, reads.go, codec.go and the .lua files), their bounds (a
// user's registers in Redis: MaxUserThreads, past which the gateway
// collects them, and ReadMax), their part of an erasure (erase.sql and
// the user's hash left empty and complete, its fields naming the channels
// the erasure cleans) and the tests of all of them. Store is the typed
// face the gateway and the persister call; Probe lets the unread and
// inbox reads tell, on their own pipeline, that a user has no register.
//
// The registers merge in Go, not in Lua: a compare-and-set script writes
// a field only where it still holds what was read, with the user's
// erasure generation read in the same script (redisstore's
// QueueReadWithGeneration); a head raise is a max in one script.
//
// It is written against the drivers (pgstore.Store's Pool and
// Classified; redisstore.Store's Exec, Client, Prefix, TombstoneKey,
// MarkLoaded, ScanTagged, the layout's codecs and markers). The drivers
// name none of its tables or keys; the read-by view's thread entries
// (pkg/views/readby) are the view's, and the inbox's reply ids the
// driver's cache beside the channels' message ids
// (pkg/kinds/heads: Store.RememberReplyIDs, called after a raise).
// The mention seqs a register keeps are its own column and field: the
// channel mention kind's table and keys are not read here.
package threads
