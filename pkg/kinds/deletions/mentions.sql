-- Which of the queries' mentions ($1 channels, $3 seqs, $4 query
-- indexes, $5 roots) are deleted within the window ($2), by query.
SELECT m.i, m.s FROM unnest($1::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS m(c, s, i, t)
		WHERE EXISTS (SELECT 1 FROM channel_deletions d WHERE d.channel_id = m.c AND d.root_seq = m.t AND d.seq = m.s
		AND d.seq > (SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = m.c AND x.root_seq = m.t))
		ORDER BY 1, 2
