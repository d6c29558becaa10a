-- Up to $3 registers after the key ($1, $2) in (user, channel) order: the
-- drift sweep's walk.
SELECT user_id, channel_id, level, muted_until_ms, version_ms FROM channel_notifications
WHERE (user_id, channel_id) > ($1, $2) ORDER BY user_id, channel_id LIMIT $3
