-- The digests (count and least seq within the window $2, greatest seq)
-- of up to $3 sets after ($1, $4) in (channel, root) order: the drift
-- sweep's walk, which reads no set.
SELECT k.c, k.r, s.n, s.least, k.top FROM (
		SELECT channel_id AS c, root_seq AS r, max(seq) AS top FROM channel_deletions
		WHERE (channel_id, root_seq) > ($1, $4) GROUP BY 1, 2 ORDER BY 1, 2 LIMIT $3) k
		CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(min(d.seq), 0) AS least FROM channel_deletions d
		WHERE d.channel_id = k.c AND d.root_seq = k.r AND d.seq > k.top - $2) s
		ORDER BY 1, 2
