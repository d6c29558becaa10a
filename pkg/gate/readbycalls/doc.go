// Package readbycalls answers read-by and ticks (GetMessageReceipts,
// GetTicks; the thread calls use its sight of a root) from the read-by
// view (pkg/views/readby), rebuilt from Postgres when Redis lacks it, one
// rebuild per channel at a time; and it keeps the view current: the
// public moves of merged marks (PublishView), joins and leaves, and the
// users' settings (what each shares).
package readbycalls
