-- User $1's registers in the channels $2, in channel order.
SELECT channel_id, user_id, member, version_seq, version_ms, join_seq
FROM channel_members WHERE user_id = $1 AND channel_id = ANY($2) ORDER BY channel_id
