-- Deletes, for each listed key ($1 users, $2 channels), the seqs below
-- its ($3 + 1)-th newest: what is left is the newest cap+1 (a backward
-- walk of the primary key per key).
DELETE FROM mentions m USING unnest($1::text[], $2::text[]) AS k(u, c)
WHERE m.user_id = k.u AND m.channel_id = k.c
  AND m.seq < (SELECT x.seq FROM mentions x WHERE x.user_id = k.u AND x.channel_id = k.c
               ORDER BY x.seq DESC OFFSET $3 LIMIT 1)
