-- Deleted thread replies (channel.Deletions with a root).

-- A thread's deleted reply seqs share channel_deletions with the channel's
-- deleted messages: root_seq is the thread root's channel seq, 0 for the
-- channel itself (every existing row). Each (channel, root) is its own
-- set with its own window; the key leads with the channel, the partition
-- key, so a channel's sets stay in one partition.
ALTER TABLE channel_deletions ADD COLUMN root_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE channel_deletions ADD CONSTRAINT channel_deletions_root CHECK (root_seq >= 0);
ALTER TABLE channel_deletions DROP CONSTRAINT channel_deletions_pkey;
ALTER TABLE channel_deletions ADD PRIMARY KEY (channel_id, root_seq, seq);
