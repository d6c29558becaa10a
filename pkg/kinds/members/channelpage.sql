-- Up to $3 of channel $1's registers with a user after $2, in user order;
-- $4: members only (those who left left out).
SELECT channel_id, user_id, member, version_seq, version_ms, join_seq
FROM channel_members WHERE channel_id = $1 AND user_id > $2 AND (member OR NOT $4) ORDER BY user_id LIMIT $3
