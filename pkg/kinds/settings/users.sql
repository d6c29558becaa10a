-- The settings rows of the users $1 (a user without one holds the
-- defaults).
SELECT user_id, share_read, share_delivered, version_ms, default_level
FROM user_settings WHERE user_id = ANY($1)
