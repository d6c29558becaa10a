-- Up to $3 of user $1's registers with a channel after $2, in channel order.
SELECT channel_id, user_id, member, version_seq, version_ms, join_seq
FROM channel_members WHERE user_id = $1 AND channel_id > $2 ORDER BY channel_id LIMIT $3
