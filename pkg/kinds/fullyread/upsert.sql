-- Merges markers into fully_read (Merge): the guard's tuple is Order's,
-- so a row moves only to a greater (seq, time, message id by length, then
-- bytes).
-- $1 users, $2 channels, $3 roots, $4 seqs, $5 message ids, $6 times (ms).
INSERT INTO fully_read AS t (user_id, channel_id, root_seq, seq, message_id, updated_at_ms)
SELECT u, c, r, q, m, a
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[]) AS x(u, c, r, q, m, a)
ON CONFLICT (user_id, channel_id, root_seq) DO UPDATE SET
    seq = excluded.seq, message_id = excluded.message_id, updated_at_ms = excluded.updated_at_ms
WHERE (excluded.seq, excluded.updated_at_ms, octet_length(excluded.message_id), convert_to(excluded.message_id, 'UTF8'))
    > (t.seq, t.updated_at_ms, octet_length(t.message_id), convert_to(t.message_id, 'UTF8'))
