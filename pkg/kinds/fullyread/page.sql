-- Up to $4 markers after the ref ($1, $2, $3) in (user, channel, root)
-- order: the drift sweep's walk.
SELECT user_id, channel_id, root_seq, seq, message_id, updated_at_ms FROM fully_read
WHERE (user_id, channel_id, root_seq) > ($1, $2, $3) ORDER BY user_id, channel_id, root_seq LIMIT $4
