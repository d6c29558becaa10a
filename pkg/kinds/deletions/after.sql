-- Up to $5 deleted seqs of the set ($1, $4) above $3 and within the
-- window ($2), ascending: a set copied in pages.
SELECT d.seq FROM channel_deletions d
		WHERE d.channel_id = $1 AND d.root_seq = $4
		AND d.seq > greatest($3, (SELECT coalesce(max(x.seq), 0) - $2 FROM channel_deletions x WHERE x.channel_id = $1 AND x.root_seq = $4))
		ORDER BY d.seq LIMIT $5
