-- Max-merges heads into channel_heads: $1..$4 = channel ids (unique, in
-- key order), seqs, message ids, acceptance times (ms). A head moves only
-- to a greater seq; its time only forward.
INSERT INTO channel_heads AS t (channel_id, head_seq, head_message_id, updated_at)
SELECT c, s, m, to_timestamp(ts / 1000.0)
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[]) AS x(c, s, m, ts)
ON CONFLICT (channel_id) DO UPDATE SET
    head_seq = excluded.head_seq, head_message_id = excluded.head_message_id,
    updated_at = GREATEST(t.updated_at, excluded.updated_at)
WHERE excluded.head_seq > t.head_seq
