-- A user's ($1) mentions in every channel, or in the listed ones ($2),
-- each key's newest $3 + 1 seqs, in key order.
SELECT user_id, channel_id, seq FROM (
		SELECT user_id, channel_id, seq, row_number() OVER (PARTITION BY channel_id ORDER BY seq DESC) AS rn
		FROM mentions WHERE user_id = $1 AND (coalesce(cardinality($2::text[]), 0) = 0 OR channel_id = ANY($2))) r
		WHERE rn <= $3 + 1 ORDER BY channel_id, seq
