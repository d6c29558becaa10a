-- Up to $3 heads after the thread ($1, $2) in thread order: the drift
-- sweep's walk.
SELECT channel_id, root_seq, head_seq, head_message_id, updated_ms FROM thread_heads
		WHERE (channel_id, root_seq) > ($1, $2) ORDER BY channel_id, root_seq LIMIT $3
