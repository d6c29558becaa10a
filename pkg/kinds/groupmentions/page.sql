-- The group mentions of up to $2 channels after $1, in channel order,
-- each channel's newest $3+1 ascending: the drift sweep's walk.
WITH chs AS (
		SELECT DISTINCT channel_id FROM channel_group_mentions WHERE channel_id > $1 ORDER BY channel_id LIMIT $2)
		SELECT channel_id, seq, sender_id FROM (
		SELECT g.channel_id, g.seq, g.sender_id, row_number() OVER (PARTITION BY g.channel_id ORDER BY g.seq DESC) AS rn
		FROM channel_group_mentions g JOIN chs USING (channel_id)) r
		WHERE rn <= $3 + 1 ORDER BY channel_id, seq
