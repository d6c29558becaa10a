-- Adds deleted seqs (a set union: an existing seq keeps its time).
-- $1 channels, $2 seqs, $3 times (ms), $4 roots (one row per seq).
INSERT INTO channel_deletions (channel_id, root_seq, seq, deleted_at)
SELECT c, r, s, to_timestamp(ts / 1000.0) FROM unnest($1::text[], $4::bigint[], $2::bigint[], $3::bigint[]) AS x(c, r, s, ts)
ORDER BY c, r, s
ON CONFLICT DO NOTHING
