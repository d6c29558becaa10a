-- The registers of the users $1 in the thread ($2, $3) that have one, in
-- user order.
SELECT user_id, channel_id, root_seq,
    read_epoch, read_seq, read_message_id, delivered_epoch, delivered_seq, delivered_message_id,
    private_read_epoch, private_read_seq, device_id, updated_ms, follow_version_ms, following, mention_seqs FROM thread_states
		WHERE user_id = ANY($1) AND channel_id = $2 AND root_seq = $3 ORDER BY user_id, channel_id, root_seq
