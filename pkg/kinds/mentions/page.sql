-- The mentions of up to $3 keys after ($1, $2), each key's newest $4 + 1
-- seqs, in key order: the drift sweep's walk.
SELECT k.user_id, k.channel_id, s.seq FROM (
		SELECT DISTINCT user_id, channel_id FROM mentions WHERE (user_id, channel_id) > ($1, $2)
		ORDER BY user_id, channel_id LIMIT $3) k
		CROSS JOIN LATERAL (SELECT seq FROM mentions m WHERE m.user_id = k.user_id AND m.channel_id = k.channel_id
			ORDER BY seq DESC LIMIT $4 + 1) s
		ORDER BY 1, 2, 3
