-- Threads: a thread is (channel_id, root_seq), the root a channel message
-- (pkg/thread).

-- A thread's head: a max-register over the reply seq, as channel_heads.
CREATE TABLE thread_heads (
    channel_id      text   NOT NULL,
    root_seq        bigint NOT NULL,
    head_seq        bigint NOT NULL,
    head_message_id text   NOT NULL DEFAULT '',
    updated_ms      bigint NOT NULL,
    PRIMARY KEY (channel_id, root_seq),
    CONSTRAINT thread_heads_bounded CHECK (
        octet_length(channel_id) BETWEEN 1 AND 128 AND octet_length(head_message_id) <= 128
        AND root_seq > 0 AND head_seq > 0 AND updated_ms >= 0)
) WITH (fillfactor = 85); -- every reply moves head_seq: HOT updates, as in 0003

-- One user's register in one thread (thread.State): the thread cursors
-- (read_receipts' columns and rules), the follow register and the
-- mentions. One row per thread the user touched (followed, read or was
-- mentioned in), never one row per reply per member: the mentions are an
-- array in the row, kept to the newest cap+1 ascending (channel.Mentions'
-- retention), not a row each as in the table mentions. No column that
-- changes is indexed, so cursor moves stay HOT updates. The primary key
-- serves a user's threads and the states of listed users in one thread.
-- Hash-partitioned by user_id like read_receipts.
CREATE TABLE thread_states (
    user_id              text     NOT NULL,
    channel_id           text     NOT NULL,
    root_seq             bigint   NOT NULL,
    read_epoch           bigint   NOT NULL DEFAULT 0,
    read_seq             bigint   NOT NULL DEFAULT 0,
    read_message_id      text     NOT NULL DEFAULT '',
    delivered_epoch      bigint   NOT NULL DEFAULT 0,
    delivered_seq        bigint   NOT NULL DEFAULT 0,
    delivered_message_id text     NOT NULL DEFAULT '',
    private_read_epoch   bigint   NOT NULL DEFAULT 0,
    private_read_seq     bigint   NOT NULL DEFAULT 0,
    device_id            text     NOT NULL DEFAULT '',
    updated_ms           bigint   NOT NULL DEFAULT 0,
    follow_version_ms    bigint   NOT NULL DEFAULT 0,
    following            boolean  NOT NULL DEFAULT false,
    mention_seqs         bigint[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (user_id, channel_id, root_seq),
    CONSTRAINT thread_states_ids_bounded CHECK (
        octet_length(user_id) BETWEEN 1 AND 128 AND octet_length(channel_id) BETWEEN 1 AND 128
        AND octet_length(read_message_id) <= 128 AND octet_length(delivered_message_id) <= 128
        AND octet_length(device_id) <= 128 AND root_seq > 0),
    CONSTRAINT thread_states_positions_bounded CHECK (
        read_epoch BETWEEN 0 AND 2147483647 AND read_seq >= 0
        AND delivered_epoch BETWEEN 0 AND 2147483647 AND delivered_seq >= 0
        AND private_read_epoch BETWEEN 0 AND 2147483647 AND private_read_seq >= 0
        AND updated_ms >= 0 AND follow_version_ms >= 0),
    CONSTRAINT thread_states_mentions_positive CHECK (
        coalesce(array_ndims(mention_seqs), 1) = 1 AND 0 < ALL (mention_seqs))
) PARTITION BY HASH (user_id);

-- fillfactor 85: cursor moves as HOT updates, as in 0003.
CREATE TABLE thread_states_p0 PARTITION OF thread_states FOR VALUES WITH (MODULUS 8, REMAINDER 0) WITH (fillfactor = 85);
CREATE TABLE thread_states_p1 PARTITION OF thread_states FOR VALUES WITH (MODULUS 8, REMAINDER 1) WITH (fillfactor = 85);
CREATE TABLE thread_states_p2 PARTITION OF thread_states FOR VALUES WITH (MODULUS 8, REMAINDER 2) WITH (fillfactor = 85);
CREATE TABLE thread_states_p3 PARTITION OF thread_states FOR VALUES WITH (MODULUS 8, REMAINDER 3) WITH (fillfactor = 85);
CREATE TABLE thread_states_p4 PARTITION OF thread_states FOR VALUES WITH (MODULUS 8, REMAINDER 4) WITH (fillfactor = 85);
CREATE TABLE thread_states_p5 PARTITION OF thread_states FOR VALUES WITH (MODULUS 8, REMAINDER 5) WITH (fillfactor = 85);
CREATE TABLE thread_states_p6 PARTITION OF thread_states FOR VALUES WITH (MODULUS 8, REMAINDER 6) WITH (fillfactor = 85);
CREATE TABLE thread_states_p7 PARTITION OF thread_states FOR VALUES WITH (MODULUS 8, REMAINDER 7) WITH (fillfactor = 85);
