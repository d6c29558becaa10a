-- The deletions within the window ($2) of up to $3 sets after ($1, $4)
-- in (channel, root) order: the drift sweep's walk.
SELECT d.channel_id, d.root_seq, d.seq FROM (
		SELECT DISTINCT channel_id, root_seq FROM channel_deletions WHERE (channel_id, root_seq) > ($1, $4)
		ORDER BY channel_id, root_seq LIMIT $3) k
		JOIN channel_deletions d ON d.channel_id = k.channel_id AND d.root_seq = k.root_seq
		WHERE d.seq > (SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = k.channel_id AND x.root_seq = k.root_seq)
		ORDER BY 1, 2, 3
