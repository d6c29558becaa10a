-- A user's registers of the listed channels, in channel order.
-- $1 the user, $2 the channels.
SELECT user_id, channel_id, level, muted_until_ms, version_ms FROM channel_notifications
WHERE user_id = $1 AND channel_id = ANY($2) ORDER BY channel_id
