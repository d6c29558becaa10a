-- How many deleted seqs each set ($1 channels, $4 roots) holds within
-- the window ($2), counting no further than $3, by its ordinal.
SELECT k.i, (SELECT count(*) FROM (SELECT 1 FROM channel_deletions d
		WHERE d.channel_id = k.c AND d.root_seq = k.r
		AND d.seq > (SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = k.c AND x.root_seq = k.r)
		LIMIT $3) x)
		FROM unnest($1::text[], $4::bigint[]) WITH ORDINALITY AS k(c, r, i)
