-- Deletes the deletions of the sets ($1 channels, $3 roots) at or below
-- their window's floor: their greatest seq less $2 (the window), an
-- index range per set.
DELETE FROM channel_deletions d USING unnest($1::text[], $3::bigint[]) AS k(c, r)
		WHERE d.channel_id = k.c AND d.root_seq = k.r
		AND d.seq <= (SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = k.c AND x.root_seq = k.r)
