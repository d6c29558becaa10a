-- The registers of the users $2 in channel $1 (left ones included), in
-- user order.
SELECT channel_id, user_id, member, version_seq, version_ms, join_seq
FROM channel_members WHERE channel_id = $1 AND user_id = ANY($2) ORDER BY user_id
