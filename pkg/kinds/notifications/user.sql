-- A user's registers in channel order, at most $2. $1 the user.
SELECT user_id, channel_id, level, muted_until_ms, version_ms FROM channel_notifications
WHERE user_id = $1 ORDER BY channel_id LIMIT $2
