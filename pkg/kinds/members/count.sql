-- How many users are members of channel $1 now.
SELECT count(*) FROM channel_members WHERE channel_id = $1 AND member
