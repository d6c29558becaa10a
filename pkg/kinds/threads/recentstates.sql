-- Up to $2 of the user $1's followed registers, the most recently active
-- first.
SELECT user_id, channel_id, root_seq,
    read_epoch, read_seq, read_message_id, delivered_epoch, delivered_seq, delivered_message_id,
    private_read_epoch, private_read_seq, device_id, updated_ms, follow_version_ms, following, mention_seqs FROM thread_states
		WHERE user_id = $1 AND following ORDER BY greatest(updated_ms, follow_version_ms) DESC LIMIT $2
