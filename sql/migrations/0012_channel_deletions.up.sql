-- Deleted messages (channel.Deletions).

-- A channel's deleted message seqs: a grow-only set (merge = union), kept
-- within channel.DeletionWindow of the channel's greatest deletion (the
-- persister trims after each write; readers apply the window themselves).
-- Read per channel, so hash-partitioned by channel_id. deleted_at is when
-- the gateway accepted the first delete of the seq.
CREATE TABLE channel_deletions (
    channel_id text        NOT NULL,
    seq        bigint      NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel_id, seq),
    CONSTRAINT channel_deletions_bounded CHECK (octet_length(channel_id) BETWEEN 1 AND 128 AND seq > 0)
) PARTITION BY HASH (channel_id);

CREATE TABLE channel_deletions_p0 PARTITION OF channel_deletions FOR VALUES WITH (MODULUS 8, REMAINDER 0);
CREATE TABLE channel_deletions_p1 PARTITION OF channel_deletions FOR VALUES WITH (MODULUS 8, REMAINDER 1);
CREATE TABLE channel_deletions_p2 PARTITION OF channel_deletions FOR VALUES WITH (MODULUS 8, REMAINDER 2);
CREATE TABLE channel_deletions_p3 PARTITION OF channel_deletions FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE channel_deletions_p4 PARTITION OF channel_deletions FOR VALUES WITH (MODULUS 8, REMAINDER 4);
CREATE TABLE channel_deletions_p5 PARTITION OF channel_deletions FOR VALUES WITH (MODULUS 8, REMAINDER 5);
CREATE TABLE channel_deletions_p6 PARTITION OF channel_deletions FOR VALUES WITH (MODULUS 8, REMAINDER 6);
CREATE TABLE channel_deletions_p7 PARTITION OF channel_deletions FOR VALUES WITH (MODULUS 8, REMAINDER 7);
