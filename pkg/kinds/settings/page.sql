-- Up to $2 settings rows with a user id after $1, in user order: the
-- drift sweep's walk.
SELECT user_id, share_read, share_delivered, version_ms, default_level
FROM user_settings WHERE user_id > $1 ORDER BY user_id LIMIT $2
