-- The deleted seqs within the window ($2) of the sets $1 channels, $3
-- roots that have any, in (channel, root, seq) order.
SELECT d.channel_id, d.root_seq, d.seq FROM unnest($1::text[], $3::bigint[]) AS k(c, r)
		JOIN channel_deletions d ON d.channel_id = k.c AND d.root_seq = k.r
		WHERE d.seq > (SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = k.c AND x.root_seq = k.r)
		GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
