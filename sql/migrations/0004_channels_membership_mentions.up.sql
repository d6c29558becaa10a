-- Channels, membership and mentions, and the private read cursor.
--
-- The private read cursor: the user's own read position, which others never
-- see. Two bigints, no message id and no index, so a cursor move stays a
-- HOT update (0003) and the row stays narrow. A constant default makes the
-- ADD COLUMN a catalog change, not a table rewrite. The column keeps the
-- greatest private position merged; readers drop it when it is not ahead
-- of the public read cursor (receipt.State.Canonical).
ALTER TABLE read_receipts
    ADD COLUMN private_read_epoch bigint NOT NULL DEFAULT 0,
    ADD COLUMN private_read_seq   bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT read_receipts_private_non_negative CHECK (private_read_epoch >= 0 AND private_read_seq >= 0);

-- A channel's head: a max-register over seq (sequences are dense per
-- channel, so a user's unread count is head_seq minus the read seq).
CREATE TABLE channel_heads (
    channel_id      text        NOT NULL PRIMARY KEY,
    head_seq        bigint      NOT NULL,
    head_message_id text        NOT NULL DEFAULT '',
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT channel_heads_bounded CHECK (
        octet_length(channel_id) BETWEEN 1 AND 128 AND octet_length(head_message_id) <= 128
        AND head_seq > 0)
) WITH (fillfactor = 85); -- every notice moves head_seq: HOT updates, as in 0003

-- Membership: a versioned register per (channel, user); the greater
-- (version_seq, version_ms, member, join_seq) wins (channel.Membership).
-- Keyed by channel for a channel's member pages; the (user_id) index
-- serves a user's channels (GetUnread's default set, the hydrate). No
-- column that changes is indexed.
CREATE TABLE channel_members (
    channel_id  text    NOT NULL,
    user_id     text    NOT NULL,
    member      boolean NOT NULL,
    version_seq bigint  NOT NULL,
    version_ms  bigint  NOT NULL,
    join_seq    bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (channel_id, user_id),
    CONSTRAINT channel_members_bounded CHECK (
        octet_length(channel_id) BETWEEN 1 AND 128 AND octet_length(user_id) BETWEEN 1 AND 128
        AND version_seq >= 0 AND version_ms >= 0 AND join_seq >= 0)
);
CREATE INDEX channel_members_user ON channel_members (user_id);

-- Mentions: the message seqs mentioning a user in a channel, one row each.
-- Inserted with ON CONFLICT DO NOTHING (a set union) and deleted in
-- batches down to each key's newest cap+1 (channel.Mentions explains why
-- the newest cap+1 and not "above the read cursor"). Hash-partitioned by
-- user_id like read_receipts.
CREATE TABLE mentions (
    user_id    text   NOT NULL,
    channel_id text   NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (user_id, channel_id, seq),
    CONSTRAINT mentions_bounded CHECK (
        octet_length(user_id) BETWEEN 1 AND 128 AND octet_length(channel_id) BETWEEN 1 AND 128 AND seq > 0)
) PARTITION BY HASH (user_id);

CREATE TABLE mentions_p0 PARTITION OF mentions FOR VALUES WITH (MODULUS 8, REMAINDER 0);
CREATE TABLE mentions_p1 PARTITION OF mentions FOR VALUES WITH (MODULUS 8, REMAINDER 1);
CREATE TABLE mentions_p2 PARTITION OF mentions FOR VALUES WITH (MODULUS 8, REMAINDER 2);
CREATE TABLE mentions_p3 PARTITION OF mentions FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE mentions_p4 PARTITION OF mentions FOR VALUES WITH (MODULUS 8, REMAINDER 4);
CREATE TABLE mentions_p5 PARTITION OF mentions FOR VALUES WITH (MODULUS 8, REMAINDER 5);
CREATE TABLE mentions_p6 PARTITION OF mentions FOR VALUES WITH (MODULUS 8, REMAINDER 6);
CREATE TABLE mentions_p7 PARTITION OF mentions FOR VALUES WITH (MODULUS 8, REMAINDER 7);
