-- A kind's name in braces is its table (kind.ComposeSQL).
-- Of channels $1, those with 1 to $2 joined members: the channels whose
-- members' moves the cursor-move log keeps.
SELECT c FROM unnest($1::text[]) AS c
WHERE (SELECT count(*) FROM (SELECT 1 FROM {members} m
	WHERE m.channel_id = c AND m.member LIMIT $2 + 1) AS n) BETWEEN 1 AND $2
