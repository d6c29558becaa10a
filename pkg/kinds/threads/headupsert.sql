-- Max-merges thread heads (thread.MergeHead): the greater seq wins with
-- its message id, and the time is the greater of the two whichever seq
-- wins. $1 channels, $2 roots, $3 seqs, $4 message ids, $5 times (ms),
-- in thread order.
INSERT INTO thread_heads AS t (channel_id, root_seq, head_seq, head_message_id, updated_ms)
SELECT c, r, s, m, ts
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[]) AS x(c, r, s, m, ts)
ON CONFLICT (channel_id, root_seq) DO UPDATE SET
    head_seq        = CASE WHEN excluded.head_seq > t.head_seq THEN excluded.head_seq ELSE t.head_seq END,
    head_message_id = CASE WHEN excluded.head_seq > t.head_seq THEN excluded.head_message_id ELSE t.head_message_id END,
    updated_ms      = GREATEST(t.updated_ms, excluded.updated_ms)
WHERE excluded.head_seq > t.head_seq OR excluded.updated_ms > t.updated_ms
