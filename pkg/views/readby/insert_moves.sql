-- A kind's name in braces is its table (kind.ComposeSQL).
-- Logs the moves ($1..$6: channel, user, side, epoch, seq, at) of joined
-- members of channels of at most $7 joined members, of a side the user
-- shares (the settings kind's table; no row: shares), that advance the log.
WITH m AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::timestamptz[])
		AS m(channel_id, user_id, kind, epoch, seq, at)
), small AS (
	SELECT ch.channel_id FROM (SELECT DISTINCT channel_id FROM m) AS ch
	WHERE (SELECT count(*) FROM (SELECT 1 FROM {members} c
		WHERE c.channel_id = ch.channel_id AND c.member LIMIT $7 + 1) AS n) BETWEEN 1 AND $7
)
INSERT INTO cursor_moves (channel_id, user_id, kind, epoch, seq, at)
SELECT m.channel_id, m.user_id, m.kind::"char", m.epoch, m.seq, m.at
FROM m JOIN small USING (channel_id)
WHERE EXISTS (SELECT 1 FROM {members} c
		WHERE c.channel_id = m.channel_id AND c.user_id = m.user_id AND c.member)
	AND NOT EXISTS (SELECT 1 FROM {settings} st WHERE st.user_id = m.user_id
		AND ((m.kind = 'r' AND NOT st.share_read) OR (m.kind = 'd' AND NOT st.share_delivered)))
	AND NOT EXISTS (SELECT 1 FROM cursor_moves x WHERE x.channel_id = m.channel_id
		AND x.kind = m.kind::"char" AND x.user_id = m.user_id AND (x.epoch, x.seq) >= (m.epoch, m.seq))
