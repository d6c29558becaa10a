-- Up to $2 heads of the channels after $1, in channel order: the drift
-- sweep's walk ('' starts at the beginning).
SELECT channel_id, head_seq, head_message_id, (extract(epoch from updated_at) * 1000)::bigint
FROM channel_heads WHERE channel_id > $1 ORDER BY channel_id LIMIT $2
