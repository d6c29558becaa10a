-- Up to $3 registers with keys after ($1, $2), in (channel, user) order:
-- the drift sweep's walk.
SELECT channel_id, user_id, member, version_seq, version_ms, join_seq
FROM channel_members WHERE (channel_id, user_id) > ($1, $2) ORDER BY channel_id, user_id LIMIT $3
