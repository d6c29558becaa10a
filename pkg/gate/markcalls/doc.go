// Package markcalls answers the read and delivered marks (MarkReceipts,
// MarkRead, MarkDelivered) and GetReadState. Concurrent calls' marks
// share one flush (coalesce.go): one Redis lookup of the channels' facts
// and the keys' values, the merge, and one durable write; each call is
// checked, and answered only when its own marks are durable, exactly as
// alone. The merge steps (MergeRedis, ResolveEpochs, MergeUnloaded) also
// serve the notices' sender reads and a join's read.
package markcalls
