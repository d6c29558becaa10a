-- A kind's name in braces is its table (kind.ComposeSQL).
-- Up to $3 channels of user $1's default set after $2 ("" first), in
-- channel order: those with a cursor or a membership register, less those
-- the user left. The set composes two kinds' tables (the cursors' and the
-- members'), so it is the view's statement.
SELECT c FROM (
    SELECT channel_id AS c FROM {cursors} WHERE user_id = $1 AND channel_id > $2
    UNION SELECT channel_id FROM {members} WHERE user_id = $1 AND channel_id > $2) x
WHERE NOT EXISTS (SELECT 1 FROM {members} m WHERE m.user_id = $1 AND m.channel_id = x.c AND NOT m.member)
ORDER BY c LIMIT $3
