-- Up to $2 of user $1's registers (left channels included), in channel order.
SELECT channel_id, user_id, member, version_seq, version_ms, join_seq
FROM channel_members WHERE user_id = $1 ORDER BY channel_id LIMIT $2
