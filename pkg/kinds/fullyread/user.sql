-- A user's markers in (channel, root) order, at most $2. $1 the user.
SELECT user_id, channel_id, root_seq, seq, message_id, updated_at_ms FROM fully_read
WHERE user_id = $1 ORDER BY channel_id, root_seq LIMIT $2
