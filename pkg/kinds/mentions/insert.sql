-- Adds mention seqs ($1 users, $2 channels, $3 seqs: one row per seq), a
-- set union: a seq already stored is left alone.
INSERT INTO mentions (user_id, channel_id, seq)
SELECT u, c, s FROM unnest($1::text[], $2::text[], $3::bigint[]) AS x(u, c, s)
ORDER BY u, c, s
ON CONFLICT DO NOTHING
