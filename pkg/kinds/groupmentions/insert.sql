-- Merges group mentions into channel_group_mentions, one row per seq:
-- the least sender of a seq wins (channel.MergeGroupMentions).
-- $1 channels, $2 seqs, $3 senders (one row per (channel, seq)).
INSERT INTO channel_group_mentions AS t (channel_id, seq, sender_id)
SELECT c, q, s FROM unnest($1::text[], $2::bigint[], $3::text[]) AS x(c, q, s)
ORDER BY c, q
ON CONFLICT (channel_id, seq) DO UPDATE SET sender_id = excluded.sender_id
WHERE excluded.sender_id < t.sender_id
