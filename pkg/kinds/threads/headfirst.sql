-- The first $1 heads in thread order: the drift sweep's walk starts.
SELECT channel_id, root_seq, head_seq, head_message_id, updated_ms FROM thread_heads ORDER BY channel_id, root_seq LIMIT $1
