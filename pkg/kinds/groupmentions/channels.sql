-- The newest $2+1 group mentions of each of the channels $1, in channel
-- order, each ascending.
SELECT channel_id, seq, sender_id FROM (
		SELECT channel_id, seq, sender_id, row_number() OVER (PARTITION BY channel_id ORDER BY seq DESC) AS rn
		FROM channel_group_mentions WHERE channel_id = ANY($1)) r
		WHERE rn <= $2 + 1 ORDER BY channel_id, seq
