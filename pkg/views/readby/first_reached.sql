-- When each of users $3 first reached seq $2 or beyond in channel $1, per
-- side, from the cursor-move log.
SELECT user_id, kind::text, (extract(epoch FROM min(at)) * 1000)::bigint
FROM cursor_moves
WHERE channel_id = $1 AND user_id = ANY($3) AND seq >= $2
GROUP BY user_id, kind
