-- A user's ($1) mentions in the channels of ($2, $3] ('' $3: to the
-- last), each key's newest $4 + 1 seqs, in key order.
SELECT user_id, channel_id, seq FROM (
		SELECT user_id, channel_id, seq, row_number() OVER (PARTITION BY channel_id ORDER BY seq DESC) AS rn
		FROM mentions WHERE user_id = $1 AND channel_id > $2 AND ($3 = '' OR channel_id <= $3)) r
		WHERE rn <= $4 + 1 ORDER BY channel_id, seq
