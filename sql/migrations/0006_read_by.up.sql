-- Read-by: users' privacy settings and the cursor-move log.
--
-- Privacy settings: a versioned register per user (privacy.Merge: the
-- greater version_ms wins; on a tie the one sharing less). No row: the
-- defaults (share both).
CREATE TABLE user_settings (
    user_id         text    NOT NULL PRIMARY KEY,
    share_read      boolean NOT NULL,
    share_delivered boolean NOT NULL,
    version_ms      bigint  NOT NULL,
    CONSTRAINT user_settings_bounded CHECK (octet_length(user_id) BETWEEN 1 AND 128 AND version_ms >= 0)
);

-- The cursor-move log: one row per public cursor move of a member of a
-- SMALL channel (member count at most the detail threshold), written by
-- the persister per window (one row per (user, channel, kind) per window,
-- only when it advances the log), none for large channels. It answers
-- "when did each member first reach seq" (GetMessageReceipts' at). Range
-- partitioned by week on at: partitions are created ahead and dropped
-- past the retention by the persister's maintenance (pgstore
-- MaintainMovePartitions), never deleted row by row.
CREATE TABLE cursor_moves (
    channel_id text        NOT NULL,
    user_id    text        NOT NULL,
    kind       "char"      NOT NULL, -- 'r' public read, 'd' delivered
    epoch      bigint      NOT NULL,
    seq        bigint      NOT NULL,
    at         timestamptz NOT NULL,
    CONSTRAINT cursor_moves_kind CHECK (kind IN ('r', 'd')),
    CONSTRAINT cursor_moves_bounded CHECK (
        octet_length(channel_id) BETWEEN 1 AND 128 AND octet_length(user_id) BETWEEN 1 AND 128
        AND epoch >= 0 AND seq >= 0)
) PARTITION BY RANGE (at);

-- Serves both the "does the log already hold this move or a later one"
-- check of the write and the per-member "first at or past seq" read of a
-- channel; at rides along so the read is index-only.
CREATE INDEX cursor_moves_member ON cursor_moves (channel_id, kind, user_id, epoch, seq) INCLUDE (at);
