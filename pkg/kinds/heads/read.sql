-- The heads of the channels $1 that have one, in channel order.
SELECT channel_id, head_seq, head_message_id, (extract(epoch from updated_at) * 1000)::bigint
FROM channel_heads WHERE channel_id = ANY($1) ORDER BY channel_id
