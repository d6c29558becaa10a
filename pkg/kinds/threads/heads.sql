-- The heads of the threads $1 channels, $2 roots that have one, in
-- thread order.
SELECT channel_id, root_seq, head_seq, head_message_id, updated_ms FROM thread_heads t
		JOIN (SELECT DISTINCT c, r FROM unnest($1::text[], $2::bigint[]) AS k(c, r)) k ON t.channel_id = k.c AND t.root_seq = k.r
		ORDER BY channel_id, root_seq
