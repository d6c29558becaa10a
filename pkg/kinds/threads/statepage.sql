-- Up to $4 registers after the key ($1, $2, $3) in key order: the
-- drift sweep's walk.
SELECT user_id, channel_id, root_seq,
    read_epoch, read_seq, read_message_id, delivered_epoch, delivered_seq, delivered_message_id,
    private_read_epoch, private_read_seq, device_id, updated_ms, follow_version_ms, following, mention_seqs FROM thread_states
		WHERE (user_id, channel_id, root_seq) > ($1, $2, $3) ORDER BY user_id, channel_id, root_seq LIMIT $4
