-- The digests (count and least seq within the window $2, greatest seq)
-- of the sets $1 channels, $3 roots that have deletions.
SELECT k.c, k.r, s.n, s.least, k.top FROM (
		SELECT q.c, q.r, (SELECT max(x.seq) FROM channel_deletions x WHERE x.channel_id = q.c AND x.root_seq = q.r) AS top
		FROM unnest($1::text[], $3::bigint[]) AS q(c, r)) k
		CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(min(d.seq), 0) AS least FROM channel_deletions d
		WHERE d.channel_id = k.c AND d.root_seq = k.r AND d.seq > k.top - $2) s
		WHERE k.top IS NOT NULL
