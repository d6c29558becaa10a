-- The markers of the refs ($1 users, $2 channels, $3 roots) that have one.
SELECT t.user_id, t.channel_id, t.root_seq, t.seq, t.message_id, t.updated_at_ms
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS x(u, c, r)
JOIN fully_read t ON t.user_id = x.u AND t.channel_id = x.c AND t.root_seq = x.r
