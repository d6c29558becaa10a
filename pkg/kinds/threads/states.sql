-- The registers of the keys $1 users, $2 channels, $3 roots that have
-- one, in key order.
SELECT user_id, channel_id, root_seq,
    read_epoch, read_seq, read_message_id, delivered_epoch, delivered_seq, delivered_message_id,
    private_read_epoch, private_read_seq, device_id, updated_ms, follow_version_ms, following, mention_seqs FROM thread_states t
		JOIN (SELECT DISTINCT u, c, r FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(u, c, r)) k
		ON t.user_id = k.u AND t.channel_id = k.c AND t.root_seq = k.r ORDER BY user_id, channel_id, root_seq
