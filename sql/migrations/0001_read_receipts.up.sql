-- One row per (user, channel): the read and delivered cursors, each a
-- max-register ordered by (epoch, seq) with the message id at that position.
-- Hash-partitioned by user_id so the layout can be distributed by user_id
-- (Citus) and each partition's indexes stay small.
CREATE TABLE read_receipts (
    user_id              text        NOT NULL,
    channel_id           text        NOT NULL,
    read_epoch           bigint      NOT NULL DEFAULT 0,
    read_seq             bigint      NOT NULL DEFAULT 0,
    read_message_id      text        NOT NULL DEFAULT '',
    delivered_epoch      bigint      NOT NULL DEFAULT 0,
    delivered_seq        bigint      NOT NULL DEFAULT 0,
    delivered_message_id text        NOT NULL DEFAULT '',
    device_id            text        NOT NULL DEFAULT '',
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, channel_id),
    CONSTRAINT read_receipts_ids_bounded CHECK (
        octet_length(user_id) BETWEEN 1 AND 128 AND octet_length(channel_id) BETWEEN 1 AND 128
        AND octet_length(read_message_id) <= 128 AND octet_length(delivered_message_id) <= 128
        AND octet_length(device_id) <= 128),
    CONSTRAINT read_receipts_positions_non_negative CHECK (
        read_epoch >= 0 AND read_seq >= 0 AND delivered_epoch >= 0 AND delivered_seq >= 0)
) PARTITION BY HASH (user_id);

CREATE TABLE read_receipts_p0 PARTITION OF read_receipts FOR VALUES WITH (MODULUS 8, REMAINDER 0);
CREATE TABLE read_receipts_p1 PARTITION OF read_receipts FOR VALUES WITH (MODULUS 8, REMAINDER 1);
CREATE TABLE read_receipts_p2 PARTITION OF read_receipts FOR VALUES WITH (MODULUS 8, REMAINDER 2);
CREATE TABLE read_receipts_p3 PARTITION OF read_receipts FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE read_receipts_p4 PARTITION OF read_receipts FOR VALUES WITH (MODULUS 8, REMAINDER 4);
CREATE TABLE read_receipts_p5 PARTITION OF read_receipts FOR VALUES WITH (MODULUS 8, REMAINDER 5);
CREATE TABLE read_receipts_p6 PARTITION OF read_receipts FOR VALUES WITH (MODULUS 8, REMAINDER 6);
CREATE TABLE read_receipts_p7 PARTITION OF read_receipts FOR VALUES WITH (MODULUS 8, REMAINDER 7);

-- Per-channel lookups ("who in this small group has read up to seq N").
CREATE INDEX read_receipts_channel_read ON read_receipts (channel_id, read_seq);
