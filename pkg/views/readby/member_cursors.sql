-- A kind's name in braces is its table (kind.ComposeSQL).
-- A page of a channel's joined members (user ids after $2, ascending, at
-- most $3) with their public cursors (zero without a row) and what they
-- share (the defaults without a settings row).
SELECT m.user_id,
	coalesce(r.read_epoch, 0), coalesce(r.read_seq, 0),
	coalesce(r.delivered_epoch, 0), coalesce(r.delivered_seq, 0),
	coalesce((extract(epoch FROM r.updated_at) * 1000)::bigint, 0),
	coalesce(st.share_read, true), coalesce(st.share_delivered, true)
FROM {members} m
LEFT JOIN {cursors} r ON r.user_id = m.user_id AND r.channel_id = m.channel_id
LEFT JOIN {settings} st ON st.user_id = m.user_id
WHERE m.channel_id = $1 AND m.member AND m.user_id > $2
ORDER BY m.user_id LIMIT $3
