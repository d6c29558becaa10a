-- Notification levels (pkg/notification).

-- A user's notification register in a channel: level 0 is unset (the
-- user's default), 1 all, 2 mentions, 3 none. The greater
-- (version_ms, level, muted_until_ms) wins (notification.Merge). One row
-- per channel the user ever set; read per user, so hash-partitioned by
-- user_id like read_receipts.
CREATE TABLE channel_notifications (
    user_id        text     NOT NULL,
    channel_id     text     NOT NULL,
    level          smallint NOT NULL,
    muted_until_ms bigint   NOT NULL,
    version_ms     bigint   NOT NULL,
    PRIMARY KEY (user_id, channel_id),
    CONSTRAINT channel_notifications_bounded CHECK (
        octet_length(user_id) BETWEEN 1 AND 128 AND octet_length(channel_id) BETWEEN 1 AND 128
        AND level BETWEEN 0 AND 3 AND muted_until_ms >= 0 AND version_ms > 0)
) PARTITION BY HASH (user_id);

CREATE TABLE channel_notifications_p0 PARTITION OF channel_notifications FOR VALUES WITH (MODULUS 8, REMAINDER 0);
CREATE TABLE channel_notifications_p1 PARTITION OF channel_notifications FOR VALUES WITH (MODULUS 8, REMAINDER 1);
CREATE TABLE channel_notifications_p2 PARTITION OF channel_notifications FOR VALUES WITH (MODULUS 8, REMAINDER 2);
CREATE TABLE channel_notifications_p3 PARTITION OF channel_notifications FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE channel_notifications_p4 PARTITION OF channel_notifications FOR VALUES WITH (MODULUS 8, REMAINDER 4);
CREATE TABLE channel_notifications_p5 PARTITION OF channel_notifications FOR VALUES WITH (MODULUS 8, REMAINDER 5);
CREATE TABLE channel_notifications_p6 PARTITION OF channel_notifications FOR VALUES WITH (MODULUS 8, REMAINDER 6);
CREATE TABLE channel_notifications_p7 PARTITION OF channel_notifications FOR VALUES WITH (MODULUS 8, REMAINDER 7);

-- The user's default level for channels without their own (0: all).
ALTER TABLE user_settings ADD COLUMN default_level smallint NOT NULL DEFAULT 0
    CONSTRAINT user_settings_default_level CHECK (default_level BETWEEN 0 AND 3);
