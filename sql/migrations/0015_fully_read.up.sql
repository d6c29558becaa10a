-- Fully-read markers (pkg/kinds/fullyread).

-- A user's fully-read marker in a channel (root_seq 0) or a thread: the
-- greatest (seq, updated_at_ms, message id by length then bytes) wins.
-- Private to the user; read per user, so hash-partitioned by user_id like
-- read_receipts.
CREATE TABLE fully_read (
    user_id       text   NOT NULL,
    channel_id    text   NOT NULL,
    root_seq      bigint NOT NULL,
    seq           bigint NOT NULL,
    message_id    text   NOT NULL,
    updated_at_ms bigint NOT NULL,
    PRIMARY KEY (user_id, channel_id, root_seq),
    CONSTRAINT fully_read_bounded CHECK (
        octet_length(user_id) BETWEEN 1 AND 128 AND octet_length(channel_id) BETWEEN 1 AND 128
        AND octet_length(message_id) <= 128 AND root_seq BETWEEN 0 AND 9007199254740991
        AND seq BETWEEN 1 AND 9007199254740991 AND updated_at_ms BETWEEN 1 AND 9007199254740991)
) PARTITION BY HASH (user_id);

CREATE TABLE fully_read_p0 PARTITION OF fully_read FOR VALUES WITH (MODULUS 8, REMAINDER 0);
CREATE TABLE fully_read_p1 PARTITION OF fully_read FOR VALUES WITH (MODULUS 8, REMAINDER 1);
CREATE TABLE fully_read_p2 PARTITION OF fully_read FOR VALUES WITH (MODULUS 8, REMAINDER 2);
CREATE TABLE fully_read_p3 PARTITION OF fully_read FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE fully_read_p4 PARTITION OF fully_read FOR VALUES WITH (MODULUS 8, REMAINDER 4);
CREATE TABLE fully_read_p5 PARTITION OF fully_read FOR VALUES WITH (MODULUS 8, REMAINDER 5);
CREATE TABLE fully_read_p6 PARTITION OF fully_read FOR VALUES WITH (MODULUS 8, REMAINDER 6);
CREATE TABLE fully_read_p7 PARTITION OF fully_read FOR VALUES WITH (MODULUS 8, REMAINDER 7);
